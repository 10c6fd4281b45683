"""Sustained bf16 GEMM and GPT-layer rates on one GPU, with nvidia-smi clocks and power sampled beside them
(the issue-35 Hopper diagnosis; measure_sustained.py is the sustained-clock run at Llama 3 8B's GEMM shapes).

Writes $OUT/sustained.json (vendored as benchmarks/data/measured/gpu_sustained_h100.json). Plain torch.
"""
import torch,time,subprocess,json,os,threading
import torch.nn.functional as F
out=os.environ.get("OUT",".");R={}
smi=[]
def poll(stop):
    while not stop.is_set():
        s=subprocess.run(["nvidia-smi","--query-gpu=clocks.sm,power.draw,temperature.gpu","--format=csv,noheader,nounits"],capture_output=True,text=True).stdout.strip()
        smi.append((time.time(),s));time.sleep(0.5)
def sustained(name,fn,flops,secs):
    for _ in range(3):fn()
    torch.cuda.synchronize();t0=time.time();w=[];n=0;tw=t0
    while time.time()-t0<secs:
        fn();n+=1
        if n%20==0:
            torch.cuda.synchronize();t=time.time();w.append(round(20*flops/(t-tw)/1e12,1));tw=t
    R[name]=w;print(name,w[:3],w[-3:],flush=True)
stop=threading.Event();th=threading.Thread(target=poll,args=(stop,));th.start()
d=torch.device("cuda");bf=torch.bfloat16
a=torch.randn(8192,8192,device=d,dtype=bf);b=torch.randn(8192,8192,device=d,dtype=bf)
sustained("mm8192",lambda:a@b,2*8192**3,25)
R["smi_mm"]=list(smi);smi.clear();time.sleep(5)
# GPT layer shard, h=8192 tp=8 sp off: M=4096 tokens, 8 heads of 128 local
M,h,t=4096,8192,8;q=h//t;f=4*h//t
x=torch.randn(M,h,device=d,dtype=bf,requires_grad=True)
W=[torch.randn(*s,device=d,dtype=bf,requires_grad=True)*0.01 for s in [(h,3*q),(q,h),(h,f),(f,h)]]
W=[w.detach().requires_grad_() for w in W]
ln1=torch.nn.LayerNorm(h,device=d,dtype=bf);ln2=torch.nn.LayerNorm(h,device=d,dtype=bf)
def layer():
    y=ln1(x)@W[0];qq,kk,vv=y.view(1,M,3,q//128,128).unbind(2)
    o=F.scaled_dot_product_attention(qq.transpose(1,2),kk.transpose(1,2),vv.transpose(1,2),is_causal=True)
    o=o.transpose(1,2).reshape(M,q)@W[1];z=x+F.dropout(o,0.1)
    m=F.gelu(ln2(z)@W[2])@W[3];r=z+F.dropout(m,0.1);r.sum().backward()
lf=3*2*M*(h*3*q+q*h+2*h*f)+3.5*2*M*M*q
sustained("layer_h8192_tp8",layer,lf,20)
R["smi_layer"]=list(smi);stop.set();th.join()
json.dump(R,open(out+"/sustained.json","w"))

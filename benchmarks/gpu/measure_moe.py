"""Measure the pieces of an MoE layer on one GPU (torch only): grouped expert GEMMs by tokens per expert, token
permute / unpermute, the router, GPT-OSS's clamped GLU, and the host's launch and sync costs.

Calibration data for issue 35 part 3 (MoE step time). The code below is verbatim what ran on 2026-11-26 on one
H100 80GB HBM3 (torch 2.11.0+cu130); it was kept compact so that it could be sent inline to the GPU machine.
It prints one JSON list; benchmarks/gpu/moe_json_to_csv.py turns that into
benchmarks/data/measured/gpu_moe_h100.csv. Each timing: CUDA-event median of 10 runs after 3, random normal data.

    PYTHONUNBUFFERED=1 python3 benchmarks/gpu/measure_moe.py > moe.json
    python3 benchmarks/gpu/moe_json_to_csv.py moe.json benchmarks/data/measured/gpu_moe_h100.csv

Rows (first field): gf / gd / gw = torch._grouped_mm (CUTLASS SM90 grouped kernel) in bf16 over g experts of t
tokens each, forward X[g*t, k] @ W[g][k, n], data gradient dY @ W^T, weight gradient X_g^T @ dY_g (reduction over
the tokens per expert); lf = the forward as one torch.mm per expert (Megatron SequentialMLP); df = one torch.mm of
all g*t rows (what a "combined rows" model prices). Fields: kind, model (q Qwen3-30B-A3B 8 local experts of
2048 -> 768 at EP16, o GPT-OSS-120B 16 of 2880 -> 2880 at EP8, d DeepSeek-V3 4 of 7168 -> 2048 at EP64; fc1 is k ->
2 n_e gate+up, fc2 n_e -> k), groups, tokens per expert, k, n, median ms, TFLOP/s (2 g t k n).
perm = index_select of T*k rows of width h out of T; unperm = index_add_ of T*k probability-weighted rows (an
atomic scatter: slower than TE's fused gather-based unpermute, kept as a bound); fields: kind, model, top-k, T, h,
0, ms, GB/s counting reads + writes. router = logits, fp32 softmax, top-k, multi-hot scatter (ms). gluc / glup =
GPT-OSS clamped GLU as eager ops / silu(gate) * up, forward + backward over (16384, 2 x 2880). launch_us = host
microseconds per tiny eager op launched without waiting; sync_ms = one .tolist() round trip on an idle GPU.
"""
import torch,time,json,sys
T=torch;d='cuda';b=T.bfloat16;R=[]
def tm(f,w=3,n=10):
 for _ in range(w):f()
 s=[]
 for _ in range(n):
  a,e=T.cuda.Event(enable_timing=True),T.cuda.Event(enable_timing=True);a.record();f();e.record();T.cuda.synchronize();s.append(a.elapsed_time(e))
 return sorted(s)[n//2]
for m,g,k,n in [("q",8,2048,768),("o",16,2880,2880),("d",4,7168,2048)]:
 for t in [128,256,512,1024,2048,4096]:
  for kk,nn in ((k,2*n),(n,k)):
   x=T.randn(g*t,kk,device=d,dtype=b);w=T.randn(g,nn,kk,device=d,dtype=b).transpose(-2,-1);y=T.randn(g*t,nn,device=d,dtype=b);o=T.arange(1,g+1,device=d,dtype=T.int32)*t;F=2.*g*t*kk*nn
   C={"gf":lambda:T._grouped_mm(x,w,offs=o),"gd":lambda:T._grouped_mm(y,w.transpose(-2,-1),offs=o),"gw":lambda:T._grouped_mm(x.t(),y,offs=o),"lf":lambda:[x[i*t:(i+1)*t]@w[i] for i in range(g)],"df":lambda:x@w[0]}
   for c,f in C.items():
    try:ms=tm(f);R.append((c,m,g,t,kk,nn,round(ms,4),round(F/ms/1e9)))
    except Exception as z:R.append((c,m,g,t,kk,nn,str(z)[:80]))
for m,t,h,k,E in [("q",4096,2048,8,128),("o",4096,2880,4,128),("d",2048,7168,8,256)]:
 x=T.randn(t,h,device=d,dtype=b);i=T.randint(0,t,(t*k,),device=d);y=T.randn(t*k,h,device=d,dtype=b);p=T.rand(t*k,1,device=d);B=4.*t*k*h
 R.append(("perm",m,k,t,h,0,round(tm(lambda:x.index_select(0,i)),4),round(B/tm(lambda:x.index_select(0,i))/1e6)))
 a=T.zeros(t,h,device=d,dtype=b);ms=tm(lambda:a.index_add_(0,i,(y*p).to(b)));R.append(("unperm",m,k,t,h,0,round(ms,4),round((B+4*t*k*h)/ms/1e6)))
 wr=T.randn(h,E,device=d,dtype=b)
 def r():
  P=T.softmax((x@wr).float(),-1);v,j=T.topk(P,k,-1);return T.zeros_like(P).scatter(1,j,v)
 R.append(("router",m,E,t,h,k,round(tm(r),4),0))
a=T.randn(16384,5760,device=d,dtype=b,requires_grad=True);G=T.randn(16384,2880,device=d,dtype=b)
def cl():
 u,v=a.chunk(2,-1);u,v=u.clamp(max=7.),v.clamp(-7.,7.);(u*T.sigmoid(1.702*u)*(v+1.)).backward(G)
def pl():
 u,v=a.chunk(2,-1);(T.nn.functional.silu(u)*v).backward(G)
R.append(("gluc","o",1,16384,2880,0,round(tm(cl),4),0));R.append(("glup","o",1,16384,2880,0,round(tm(pl),4),0))
s=T.ones(8,device=d);T.cuda.synchronize();t0=time.perf_counter()
for _ in range(2000):s.add_(1.)
R.append(("launch_us",round((time.perf_counter()-t0)/2e3*1e6,3)));S=[]
for _ in range(50):
 T.cuda.synchronize();t0=time.perf_counter();s[:2].tolist();S.append(time.perf_counter()-t0)
R.append(("sync_ms",round(sorted(S)[25]*1e3,4),T.__version__,T.version.cuda,T.cuda.get_device_name(0)))
print(json.dumps(R))

"""FP8 companion of benchmarks/gpu/measure_moe.py: the expert GEMMs' forward as torch._scaled_grouped_mm (e4m3, rowwise
fp32 scales, bf16 out: the SM90 grouped FP8 kernel) against one torch._scaled_mm of all the groups' rows, at the same
shapes and tokens per expert. Verbatim what ran on 2026-11-26 on one H100 80GB HBM3 (torch 2.11.0+cu130); rows
sg (grouped) / sd (one GEMM): kind, model, groups, tokens per expert, k, n, median ms, TFLOP/s.

    PYTHONUNBUFFERED=1 python3 benchmarks/gpu/measure_moe_fp8.py > fp8.json
    python3 benchmarks/gpu/moe_json_to_csv.py fp8.json benchmarks/data/measured/gpu_moe_fp8_h100.csv
"""
import torch as T,json
d='cuda';R=[];f8=T.float8_e4m3fn
def tm(f,w=3,n=10):
 for _ in range(w):f()
 s=[]
 for _ in range(n):
  a,e=T.cuda.Event(enable_timing=True),T.cuda.Event(enable_timing=True);a.record();f();e.record();T.cuda.synchronize();s.append(a.elapsed_time(e))
 return sorted(s)[n//2]
for m,g,k,n in [("q",8,2048,768),("o",16,2880,2880),("d",4,7168,2048)]:
 for t in [128,256,512,1024,2048,4096]:
  for kk,nn in ((k,2*n),(n,k)):
   x=T.randn(g*t,kk,device=d).to(f8);w=T.randn(g,nn,kk,device=d).to(f8).transpose(-2,-1);sa=T.ones(g*t,device=d);sb=T.ones(g,nn,device=d);o=T.arange(1,g+1,device=d,dtype=T.int32)*t;F=2.*g*t*kk*nn
   w0=w[0];sa1=T.ones(g*t,1,device=d);sb1=T.ones(1,nn,device=d)
   C={"sg":lambda:T._scaled_grouped_mm(x,w,sa,sb,offs=o,out_dtype=T.bfloat16),"sd":lambda:T._scaled_mm(x,w0,sa1,sb1,out_dtype=T.bfloat16)}
   for c,fn in C.items():
    try:ms=tm(fn);R.append((c,m,g,t,kk,nn,round(ms,4),round(F/ms/1e9)))
    except Exception as z:R.append((c,m,g,t,kk,nn,str(z)[:120]))
print(json.dumps(R))

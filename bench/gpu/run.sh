#!/bin/bash
# GPU proof, call 2 (bench/gpu/pack.py): vLLM's main kernels, the models and the replay; then bench/gpu/proof.py
# with this script's arguments. INNER: the proof's own time limit (s). OUT: where gpu_proof.json, nvidia-smi's
# report and the server logs are copied (default /root/gpu/out).
OUT=${OUT:-/root/gpu/out}; mkdir -p "$OUT"
SITE=/root/site; export PYTHONPATH=$SITE VLLM_USE_FLASHINFER_SAMPLER=0  # flashinfer is not carried: top-k/top-p sampling falls back to torch
python3 -c "import lzma,shutil;shutil.copyfileobj(lzma.open('.gpu/b/_C_stable_libtorch.abi3.so.xz'),open('$SITE/vllm/_C_stable_libtorch.abi3.so','wb'))"
rm -rf /root/gpu/models && cp -r .gpu/b/models /root/gpu/models
python3 -c "import lzma,shutil;shutil.copyfileobj(lzma.open('.gpu/b/replay_scaled.jsonl.xz'),open('/root/gpu/replay.jsonl','wb'))"
python3 -c "import torch, vllm._C_stable_libtorch; print('kernels load')" 2>&1 | tail -2
rm -rf /root/gpu/run
LAB_VLLM=$SITE/bin/vllm PYTHONUNBUFFERED=1 timeout ${INNER:-480} python3 bench/gpu/proof.py --models /root/gpu/models --replay /root/gpu/replay.jsonl --out /root/gpu/run "$@" 2>&1 | grep -E "^==|Error|error|Traceback" | cut -c1-1500 | tail -40
cp /root/gpu/run/gpu_proof.json $OUT/ 2>/dev/null; nvidia-smi > $OUT/nvidia-smi.txt 2>&1
(cd /root/gpu/run && tar -czf $OUT/logs.tgz logs offline.log 2>/dev/null)
for f in /root/gpu/run/logs/*.log; do echo "--- $f"; grep -E "Error|error|backend|Available KV|KV cache|Loading|took" $f | head -12; done | cut -c1-300 | tail -40

#!/bin/bash
# GPU proof, call 1 (bench/gpu/pack.py): install vLLM 0.25.1 (its main kernels come in call 2) and the packages
# the image lacks into /root/site, with `vllm` and `python` wrappers in /root/site/bin.
START=$(date +%s)
nvidia-smi --query-gpu=name,memory.total,memory.used,driver_version --format=csv
python3 -V; which python3 gcc cc nvcc; python3 -c "import sysconfig,os;p=sysconfig.get_paths()['include'];print(p, 'Python.h', os.path.exists(p+'/Python.h'))"
python3 -m pip list 2>/dev/null | grep -iE "^(torch|transformers|tokenizers|triton|numba|numpy|peft|huggingface.hub|safetensors|psutil|httpx|pyyaml|jinja2|protobuf|aiohttp|msgspec|setuptools|filelock|requests|regex) "
SITE=/root/site; mkdir -p $SITE/bin /root/gpu
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target $SITE .gpu/a/*.whl 2>&1 | tail -3
tar -C $SITE -xJf .gpu/a/vllm-py.tar.xz
python3 -c "import lzma,shutil;shutil.copyfileobj(lzma.open('.gpu/a/_vllm_fa3_C.abi3.so.xz'),open('$SITE/vllm/vllm_flash_attn/_vllm_fa3_C.abi3.so','wb'))"
PY=$(which python3)
printf '#!/bin/sh\nexport PYTHONPATH=%s${PYTHONPATH:+:$PYTHONPATH}\nexec %s -m vllm.entrypoints.cli.main "$@"\n' $SITE $PY > $SITE/bin/vllm
printf '#!/bin/sh\nexport PYTHONPATH=%s${PYTHONPATH:+:$PYTHONPATH}\nexec %s "$@"\n' $SITE $PY > $SITE/bin/python
chmod +x $SITE/bin/vllm $SITE/bin/python
export PYTHONPATH=$SITE
python3 -c "import vllm, vllm.entrypoints.openai.api_server, vllm.entrypoints.cli.main; print('vllm', vllm.__version__)" 2>&1 | grep -v "^INFO" | tail -6
python3 -c "import sys; sys.path.insert(0,'.'); import bench.gpu.proof, lab.runs.replay_cli, lab.cli; print('lab imports ok')" 2>&1 | tail -4
python3 -c "from vllm.platforms import current_platform as p; print('platform', p.device_type, p.get_device_capability())" 2>&1 | grep -v "^INFO" | tail -4
du -sh $SITE; echo "setup took $(( $(date +%s) - START )) s"

"""One OpenAI-compatible client for every model server (`vllm serve`, `transformers serve`,
llama.cpp's `llama-server`, …), built on the `openai` SDK.

    endpoints.py   base URLs, the replicas of one engine, least-outstanding choice
    fields.py      the request fields: full sampling, extensions, what a server refused
    probe.py       what `/v1/models` says (served models, `max_model_len`, who serves them)
    stream.py      one streamed completion -> a Completion with per-request TTFT and latency
    failures.py    SDK exceptions -> one-line messages, and whether another try may help
"""

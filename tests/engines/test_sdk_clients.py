"""Every engine kind that speaks the OpenAI protocol builds its client with the `openai` SDK as installed.

The SDK runs on an HTTP library of its own choosing (httpx2 for openai 3.x); a release of that library once
refused the `httpx.Timeout` the lab passed, and every served engine failed to load on a fresh install. The
lab now passes the SDK only its own types (`openai.Timeout`, numbers), and these tests build each kind's
client on the installed versions and send it to a closed loopback port: the answer must be the lab's
"unreachable" message, not a TypeError or an AttributeError from inside the SDK."""
from __future__ import annotations

import openai
import pytest

from lab.engines import create_engine
from lab.engines.client.failures import classify
from lab.engines.openai_engine import OpenAIEngine
from lab.errors import EngineLoadError
from tests.helpers_servers import free_port

KINDS = ("openai", "vllm", "transformers-serve")


def client_of(kind: str, base_url: str, model_dir) -> OpenAIEngine:
    """The kind's OpenAI-compatible client for a server at `base_url` (built, not loaded)."""
    if kind == "openai":
        engine = create_engine(f"openai:{base_url}/v1#{model_dir}?retries=0")
        assert isinstance(engine, OpenAIEngine)
        return engine
    return create_engine(f"{kind}:{model_dir}").client_for(base_url)


@pytest.mark.parametrize("kind", KINDS)
def test_each_kind_builds_its_client_on_the_installed_sdk(kind, tmp_path):
    base_url = f"http://127.0.0.1:{free_port()}"
    client = client_of(kind, base_url, tmp_path)
    with pytest.raises(EngineLoadError) as failed:
        client.load()
    message = str(failed.value)
    assert f"endpoint {base_url}/v1 unreachable" in message and "ConnectError" in message, message
    assert "Timeout" not in message and "attribute" not in message


def test_the_client_carries_the_sdks_own_timeout(tmp_path):
    client = client_of("openai", f"http://127.0.0.1:{free_port()}", tmp_path)
    client.timeout = 7.0
    try:
        client._open_clients()  # noqa: SLF001 - the one place the lab hands the SDK its settings
        sdk_client = client.replicas.replicas[0].client
        assert isinstance(sdk_client, openai.OpenAI)
        assert isinstance(sdk_client.timeout, openai.Timeout)
        assert (sdk_client.timeout.read, sdk_client.timeout.connect) == (7.0, 7.0)
    finally:
        client.close()


def test_a_failed_request_is_classified_from_the_sdks_own_errors(tmp_path):
    """A request to a closed port raises the SDK's APIConnectionError (its HTTP library's error is the cause,
    whatever that library is), and the lab's message names the endpoint."""
    client = client_of("openai", f"http://127.0.0.1:{free_port()}", tmp_path)
    client._open_clients()  # noqa: SLF001
    try:
        with pytest.raises(openai.APIConnectionError) as raised:
            client.replicas.replicas[0].client.models.list()
        failure = classify(raised.value, client.base_url, "m", client.timeout)
        assert failure.unreachable and failure.retryable and client.base_url in failure.message
    finally:
        client.close()

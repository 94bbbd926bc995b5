"""Model servers the lab starts, supervises and stops (`vllm serve`, `transformers serve`)."""
from lab.engines.servers.supervisor import (
    CRASHED,
    READY,
    STARTING,
    STOPPED,
    ManagedServer,
    ServerFailed,
    exit_promptly,
    install_exit_handlers,
    live_servers,
    stop_all,
)

__all__ = [
    "CRASHED",
    "READY",
    "STARTING",
    "STOPPED",
    "ManagedServer",
    "ServerFailed",
    "exit_promptly",
    "install_exit_handlers",
    "live_servers",
    "stop_all",
]

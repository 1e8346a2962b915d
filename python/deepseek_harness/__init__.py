"""Python SDK for harnessd, the DeepSeek Harness runtime.

Quick start::

    from deepseek_harness import DeepSeekHarness

    with DeepSeekHarness(session_root="sessions") as harness:
        result = harness.session().run("hello")
        print(result.status, result.final_response)   # ok echo: hello
"""

__version__ = "0.1.0"

from .client import DEFAULT, HarnessClient, PendingRequest, Subscription  # noqa: E402
from .errors import (  # noqa: E402
    SESSION_BUSY,
    HarnessError,
    HarnessTimeout,
    NotificationTimeout,
    ProtocolError,
    RequestTimeout,
    RpcError,
    RuntimeNotFoundError,
    SessionBusyError,
    TransportClosed,
)
from .harness import DeepSeekHarness, HarnessConfig, Session, client_from_config, find_runtime_bin  # noqa: E402
from .transport import StdioTransport, TcpTransport, Transport  # noqa: E402
from .types import (  # noqa: E402
    Notification,
    SessionPromptResponse,
    TurnResult,
    content_blocks,
    message_text,
    session_log_filename,
    text_block,
)

__all__ = [
    "__version__",
    "DEFAULT",
    "DeepSeekHarness",
    "HarnessClient",
    "HarnessConfig",
    "HarnessError",
    "HarnessTimeout",
    "Notification",
    "NotificationTimeout",
    "PendingRequest",
    "ProtocolError",
    "RequestTimeout",
    "RpcError",
    "RuntimeNotFoundError",
    "SESSION_BUSY",
    "Session",
    "SessionBusyError",
    "SessionPromptResponse",
    "StdioTransport",
    "Subscription",
    "TcpTransport",
    "Transport",
    "TransportClosed",
    "TurnResult",
    "client_from_config",
    "content_blocks",
    "find_runtime_bin",
    "message_text",
    "session_log_filename",
    "text_block",
]

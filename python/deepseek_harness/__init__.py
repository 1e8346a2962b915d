"""Python SDK for harnessd, the DeepSeek Harness runtime.

The public API is upstream's ``deepseek_harness`` SDK, as changed by the RFC
that makes JSON-RPC directional: a program written for upstream's SDK runs
against harnessd unchanged. Quick start::

    from deepseek_harness import DeepSeekHarness

    with DeepSeekHarness() as harness:
        result = harness.run("Say hi.")

Errors live in :mod:`deepseek_harness.errors` (not re-exported here, as
upstream).
"""

from .api import DeepSeekHarness, DeepSeekHarnessConfig, Session, TurnResult
from .client import HarnessClient, HarnessConfig
from .models import InitializeResponse, JsonObject, Notification, ServerInfo, SessionPromptResponse

__version__ = "0.1.0"

__all__ = [
    "DeepSeekHarness",
    "DeepSeekHarnessConfig",
    "HarnessClient",
    "HarnessConfig",
    "InitializeResponse",
    "JsonObject",
    "Notification",
    "ServerInfo",
    "Session",
    "SessionPromptResponse",
    "TurnResult",
]

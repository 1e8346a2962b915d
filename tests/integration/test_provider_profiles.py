"""Provider profiles: `[providers.NAME]` tables of the config file add OpenAI-compatible endpoints
beside the built-in `deepseek` profile, each listed in capabilities.providers, each with its own
base URL, key and models; the model catalog and the profiles' `models` tables give a session its
default context window. The in-repo OpenAI mock (tests/mock) plays every endpoint."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from harnessd_helpers import INVALID_PARAMS, error_of, harnessd_bin, result_of, text_deltas
from test_deepseek import KEY, OK, mock  # noqa: F401  (the fixture)


def write_config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "harnessd.toml"
    path.write_text(text)
    return path


def local_profile(url: str, name: str = "local", extra: str = "") -> str:
    return (f'[providers.{name}]\nkind = "openai"\nbase_url = "{url}/v1"\n'
            f'models = {{ "qwen" = {{ context_window = 32768 }} }}\n{extra}')


def header_of(events: list[dict]) -> dict:
    headers = [e["data"] for e in events if e["type"] == "request/header"]
    assert len(headers) == 1, headers
    return headers[0]


def test_a_profile_is_a_provider_clients_can_choose(spawn, mock, tmp_path):
    m = mock([{"text": "local answer", "chunk": 3}])
    cfg = write_config(tmp_path, local_profile(m.url))
    d = spawn(args=["--config", str(cfg)], env={"DEEPSEEK_API_KEY": None})
    c = d.connect()
    init = c.initialize(provider="local")
    assert sorted(init["capabilities"]["providers"]) == ["local", "scripted"]
    resp, events = c.run_prompt("s", "hello")
    assert result_of(resp) == OK
    assert "".join(text_deltas(events)) == "local answer"
    header = header_of(events)
    assert header["provider"] == "local" and header["model"] == "qwen"
    assert header["settings"]["contextWindow"] == 32768
    [request] = m.requests()
    assert request["path"] == "/v1/chat/completions"
    assert request["body"]["model"] == "qwen"
    # A server without a key gets no Authorization header at all.
    assert not any(k.lower() == "authorization" for k in request["headers"]), request["headers"]


def test_profiles_and_the_builtin_deepseek_each_reach_their_own_endpoint_with_their_own_key(
        spawn, mock, tmp_path):
    ds = mock([{"text": "from deepseek"}], require_key=KEY)
    other = mock([{"text": "from other"}], require_key="other-secret")
    cfg = write_config(tmp_path, (f'[providers.other]\nkind = "openai"\nbase_url = "{other.url}"\n'
                                  f'api_key_env = "OTHER_KEY"\ndefault_model = "big"\n'
                                  f'models = {{ "big" = {{ context_window = 200000 }}, '
                                  f'"small" = {{ context_window = 8192 }} }}\n'))
    d = spawn(args=["--config", str(cfg)],
              env={"DEEPSEEK_API_KEY": KEY, "DEEPSEEK_BASE_URL": ds.url, "OTHER_KEY": "other-secret"})
    expected = {"deepseek": ("from deepseek", "deepseek-chat", 128000), "other": ("from other", "big", 200000)}
    for provider, (text, model, window) in expected.items():
        c = d.connect()
        init = c.initialize(provider=provider)
        assert sorted(init["capabilities"]["providers"]) == ["deepseek", "other", "scripted"]
        resp, events = c.run_prompt(f"s-{provider}", "hi")
        assert result_of(resp) == OK, (provider, result_of(resp))
        assert "".join(text_deltas(events)) == text
        header = header_of(events)
        assert (header["model"], header["settings"]["contextWindow"]) == (model, window)
    assert len(ds.requests()) == 1 and len(other.requests()) == 1
    # A model the profile lists but the session names explicitly.
    c = d.connect()
    c.initialize(provider="other", model="small")
    resp, events = c.run_prompt("s-small", "hi")
    assert header_of(events)["settings"]["contextWindow"] == 8192


@pytest.mark.parametrize("model,window", [("deepseek-chat", 128000), ("deepseek-reasoner", 128000),
                                          ("deepseek-v4-flash", 256000), ("deepseek-v4-pro", 256000),
                                          ("some-future-model", 128000)])
def test_the_catalog_gives_known_models_their_window(spawn, mock, model, window):
    m = mock([{"text": "ok"}])
    d = spawn(env={"DEEPSEEK_API_KEY": KEY, "DEEPSEEK_BASE_URL": m.url})
    c = d.connect()
    c.initialize(provider="deepseek", model=model)
    resp, events = c.run_prompt("s", "hi")
    assert result_of(resp) == OK
    assert header_of(events)["settings"]["contextWindow"] == window


def test_window_precedence_initialize_then_profile_then_flag_then_catalog(spawn, mock, tmp_path):
    m = mock([{"text": "ok"}])
    cfg = write_config(tmp_path, local_profile(m.url))
    d = spawn(args=["--config", str(cfg), "--context-window", "50000"],
              env={"DEEPSEEK_API_KEY": KEY, "DEEPSEEK_BASE_URL": m.url})
    cases = [({"provider": "local"}, 32768),              # the profile's models table beats the flag
             ({"provider": "deepseek"}, 50000),           # the flag beats the catalog
             ({"provider": "scripted"}, 50000),
             ({"provider": "local", "contextWindow": 9000}, 9000)]  # initialize beats everything
    for i, (init, window) in enumerate(cases):
        c = d.connect()
        c.initialize(**init)
        resp, events = c.run_prompt(f"s{i}", "hi")
        assert result_of(resp) == OK, init
        assert header_of(events)["settings"]["contextWindow"] == window, init


def test_a_deepseek_table_replaces_the_builtin_profile(spawn, mock, tmp_path):
    m = mock([{"text": "replaced"}])
    cfg = write_config(tmp_path, (f'[providers.deepseek]\nkind = "openai"\nbase_url = "{m.url}"\n'
                                  f'default_model = "deepseek-v4-pro"\n'))
    d = spawn(args=["--config", str(cfg), "--provider", "deepseek"], env={"DEEPSEEK_API_KEY": None})
    c = d.connect()
    init = c.initialize()
    assert sorted(init["capabilities"]["providers"]) == ["deepseek", "scripted"]
    resp, events = c.run_prompt("s", "hi")
    assert result_of(resp) == OK and "".join(text_deltas(events)) == "replaced"
    header = header_of(events)
    assert header["provider"] == "deepseek" and header["model"] == "deepseek-v4-pro"
    assert header["settings"]["contextWindow"] == 256000
    assert m.requests()[0]["body"]["model"] == "deepseek-v4-pro"


def test_an_unknown_provider_names_the_registered_ones_in_its_error(spawn, mock, tmp_path):
    m = mock([{"text": "ok"}])
    d = spawn(args=["--config", str(write_config(tmp_path, local_profile(m.url)))], env={"DEEPSEEK_API_KEY": None})
    c = d.connect()
    rid = c.request("initialize", {"provider": "nope"})
    err = error_of(c.response(rid))
    assert err["code"] == INVALID_PARAMS and '"nope"' in err["message"], err


@pytest.mark.parametrize("table,env,expected", [
    ('[providers.x]\nbase_url = "http://127.0.0.1:1"\ndefault_model = "m"\n', {}, 'needs kind = "openai"'),
    ('[providers.x]\nkind = "anthropic"\nbase_url = "http://127.0.0.1:1"\n', {}, 'the only kind is "openai"'),
    ('[providers.x]\nkind = "openai"\ndefault_model = "m"\n', {}, "needs base_url"),
    ('[providers.x]\nkind = "openai"\nbase_url = "http://127.0.0.1:1"\n', {}, "needs default_model"),
    ('[providers.x]\nkind = "openai"\nbase_url = "http://127.0.0.1:1"\ndefault_model = "m"\nmodel = "m"\n', {},
     'unknown key "model"'),
    ('[providers.x]\nkind = "openai"\nbase_url = "http://127.0.0.1:1"\nmodels = { m = { context_window = 0 } }\n',
     {}, "context_window must be a number of tokens"),
    ('[providers.x]\nkind = "openai"\nbase_url = "http://127.0.0.1:1"\nmodels = { m = { window = 9 } }\n', {},
     'unknown key "window"'),
    ('[providers.x]\nkind = "openai"\nbase_url = "http://127.0.0.1:1"\ndefault_model = "m"\n'
     'api_key_env = "HARNESSD_TEST_UNSET_KEY"\n', {"HARNESSD_TEST_UNSET_KEY": None}, "is not set"),
    ('[providers.x]\nkind = "openai"\nbase_url = "http://127.0.0.1:1"\ndefault_model = "m"\napi_key_env = "A B"\n',
     {}, "must name an environment variable"),
    ('[providers.x]\nkind = "openai"\nbase_url = "ftp://example.com"\ndefault_model = "m"\n', {}, "base_url"),
    ('[providers.scripted]\nkind = "openai"\nbase_url = "http://127.0.0.1:1"\ndefault_model = "m"\n', {},
     "built-in test provider"),
    ('[providers."a b"]\nkind = "openai"\nbase_url = "http://127.0.0.1:1"\ndefault_model = "m"\n', {},
     "a provider name is"),
    ('providers = 3\n', {}, '"providers" must be tables'),
])
def test_a_bad_profile_is_a_start_up_error_naming_its_line(tmp_path, table, env, expected):
    cfg = write_config(tmp_path, "# providers\n" + table)
    import os
    proc_env = {k: v for k, v in os.environ.items() if k not in env}
    proc = subprocess.run([harnessd_bin(), "--config", str(cfg), "--listen", "tcp://127.0.0.1:0",
                           "--session-root", str(tmp_path / "s")],
                          capture_output=True, text=True, timeout=10, env=proc_env)
    assert proc.returncode == 2, proc.stderr
    assert expected in proc.stderr, proc.stderr
    assert f"{cfg} line " in proc.stderr, proc.stderr


def test_a_default_provider_that_no_profile_defines_is_a_start_up_error(tmp_path):
    proc = subprocess.run([harnessd_bin(), "--provider", "local", "--listen", "tcp://127.0.0.1:0",
                           "--session-root", str(tmp_path / "s")],
                          capture_output=True, text=True, timeout=10)
    assert proc.returncode == 2, proc.stderr
    assert "--provider local is not available (no [providers.local] table)" in proc.stderr

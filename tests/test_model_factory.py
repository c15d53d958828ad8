"""Tests for teamgraph.models: the model factory (``resolve_model``), from specs, objects and the environment."""

from __future__ import annotations

import os

import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage, SystemMessage
from test_models import YAML_SCRIPT

from teamgraph.models import (
    ModelNotConfiguredError,
    ScriptedChatModel,
    resolve_model,
)

ASK = [SystemMessage("You are on a team."), HumanMessage("Build a login page")]


# --- factory -----------------------------------------------------------------------


@pytest.fixture
def env(monkeypatch):
    for name in ("TEAMGRAPH_MODEL", "OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_API_BASE"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_openai_string_builds_chat_openai_from_the_environment(env):
    from langchain_openai import ChatOpenAI

    env.setenv("OPENAI_API_KEY", "sk-test")
    env.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")

    model = resolve_model("openai:gpt-4o-mini")

    assert isinstance(model, ChatOpenAI)
    assert model.model_name == "gpt-4o-mini"
    assert model.openai_api_base == "http://127.0.0.1:9/v1"
    assert model.openai_api_key.get_secret_value() == "sk-test"
    assert model.reasoning_effort is None


def test_base_url_without_key_uses_a_placeholder_key(env):
    env.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")

    model = resolve_model("openai:local-model")

    assert model.openai_api_key.get_secret_value() == "not-needed"


def test_openai_without_key_or_base_url_is_not_configured(env):
    with pytest.raises(ModelNotConfiguredError, match="OPENAI_API_KEY"):
        resolve_model("openai:gpt-4o")


def test_models_are_cached_per_spec_and_environment(env):
    env.setenv("OPENAI_API_KEY", "sk-test")
    assert resolve_model("openai:gpt-4o") is resolve_model("openai:gpt-4o")
    assert resolve_model("openai:gpt-4o") is not resolve_model("openai:gpt-4o-mini")

    env.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    assert resolve_model("openai:gpt-4o").openai_api_base == "http://127.0.0.1:9/v1"


def test_scripted_string_and_environment_fallback(env, tmp_path):
    path = tmp_path / "team.yaml"
    path.write_text(YAML_SCRIPT)

    model = resolve_model(f"scripted:{path}")
    assert isinstance(model, ScriptedChatModel)
    assert model.invoke(ASK).tool_calls[0]["name"] == "create_sub_agent"
    assert resolve_model(f"scripted:{path}") is model

    env.setenv("TEAMGRAPH_MODEL", f"scripted:{path}")
    assert resolve_model() is model
    assert resolve_model(None, role_model="gpt-4o", thinking_mode="deep") is model


def test_edited_script_file_is_reread(env, tmp_path):
    path = tmp_path / "team.yaml"
    path.write_text("Team Leader: [one]\n")
    first = resolve_model(f"scripted:{path}")
    path.write_text("Team Leader: [two]\n")
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))

    assert resolve_model(f"scripted:{path}").invoke(ASK).content == "two"
    assert first.invoke(ASK).content == "one"


def test_missing_environment_explains_every_way_to_configure(env):
    with pytest.raises(ModelNotConfiguredError) as info:
        resolve_model()

    message = str(info.value)
    for hint in (
        "TEAMGRAPH_MODEL is not set",
        "TEAMGRAPH_MODEL=openai:<model>",
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "TEAMGRAPH_MODEL=scripted:<path.yaml>",
        "model=",
        "teamgraph demo",
    ):
        assert hint in message


def test_role_model_overrides_the_model_name(env):
    from langchain_anthropic import ChatAnthropic

    env.setenv("OPENAI_API_KEY", "sk-test")
    env.setenv("ANTHROPIC_API_KEY", "sk-ant-test")

    assert resolve_model("openai:gpt-4o-mini", role_model="qwen3-max").model_name == "qwen3-max"
    assert resolve_model("openai:gpt-4o-mini", role_model="openai:gpt-4o").model_name == "gpt-4o"
    assert resolve_model("openai:gpt-4o-mini", role_model="inherit").model_name == "gpt-4o-mini"
    assert resolve_model("openai:gpt-4o-mini", role_model=None).model_name == "gpt-4o-mini"
    other = resolve_model("openai:gpt-4o-mini", role_model="anthropic:claude-sonnet-4-5")
    assert isinstance(other, ChatAnthropic) and other.model == "claude-sonnet-4-5"
    with pytest.raises(ValueError, match="cannot name a script"):
        resolve_model("openai:gpt-4o-mini", role_model="scripted:x.yaml")


def test_a_scripted_model_object_plays_every_role(env):
    model = ScriptedChatModel({"*": ["hi"]})

    assert resolve_model(model, role_model="gpt-4o", thinking_mode="deep") is model


def test_a_role_model_wins_over_a_team_model_object(env):
    from langchain_anthropic import ChatAnthropic
    from langchain_openai import ChatOpenAI

    env.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    team_model = ChatOpenAI(model="gpt-4o-mini", api_key="sk-x", base_url="http://127.0.0.1:9/v1")

    assert resolve_model(team_model) is team_model
    assert resolve_model(team_model, role_model="inherit") is team_model
    renamed = resolve_model(team_model, role_model="gpt-4o")
    # A bare name keeps the object's client settings and changes only the model.
    assert isinstance(renamed, ChatOpenAI) and renamed.model_name == "gpt-4o"
    assert renamed.openai_api_base == "http://127.0.0.1:9/v1" and team_model.model_name == "gpt-4o-mini"
    assert isinstance(resolve_model(team_model, role_model="anthropic:claude-opus-4-1"), ChatAnthropic)


def test_chat_openai_streams_token_usage(env):
    env.setenv("OPENAI_API_KEY", "sk-test")

    assert resolve_model("openai:gpt-4o-mini").stream_usage is True


@pytest.mark.parametrize(
    ("name", "mode", "effort"),
    [("o3", "deep", "high"), ("gpt-5-mini", "deep", "high"), ("o3", "fast", None), ("gpt-4o", "deep", None)],
)
def test_deep_thinking_sets_reasoning_effort_on_reasoning_models(env, name, mode, effort):
    env.setenv("OPENAI_API_KEY", "sk-test")

    assert resolve_model(f"openai:{name}", thinking_mode=mode).reasoning_effort == effort


def test_any_provider_through_init_chat_model(env):
    from langchain_anthropic import ChatAnthropic
    from langchain_ollama import ChatOllama

    env.setenv("ANTHROPIC_API_KEY", "sk-ant-test")

    claude = resolve_model("anthropic:claude-sonnet-4-5")
    assert isinstance(claude, ChatAnthropic) and claude.model == "claude-sonnet-4-5"
    assert claude.thinking is None
    assert resolve_model("anthropic:claude-sonnet-4-5") is claude
    assert isinstance(resolve_model("ollama:llama3.1"), ChatOllama)


def test_deep_thinking_per_provider(env):
    env.setenv("ANTHROPIC_API_KEY", "sk-ant-test")

    deep = resolve_model("anthropic:claude-sonnet-4-5", thinking_mode="deep")
    assert deep.thinking == {"type": "enabled", "budget_tokens": 8192}
    assert deep.max_tokens > deep.thinking["budget_tokens"]
    # Claude 3.5 has no extended thinking: the prompt asks instead.
    assert resolve_model("anthropic:claude-3-5-haiku-latest", thinking_mode="deep").thinking is None
    assert resolve_model("ollama:qwen3", thinking_mode="deep").reasoning is True
    assert resolve_model("ollama:qwen3", thinking_mode="fast").reasoning is None


def test_a_missing_provider_package_is_named(env):
    from teamgraph.models import ModelPackageMissingError

    try:
        import langchain_mistralai  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("langchain-mistralai is installed here; the missing-package path cannot be shown with it")

    with pytest.raises(ModelPackageMissingError, match="needs the package langchain-mistralai") as info:
        resolve_model("mistralai:mistral-large-latest")
    assert info.value.package == "langchain-mistralai"
    assert isinstance(info.value, ImportError)


@pytest.mark.parametrize("spec", ["gpt-4o", "nosuchprovider:model", "openai:", "scripted:", ":gpt-4o"])
def test_unknown_spec_lists_the_accepted_forms(env, spec):
    with pytest.raises(ValueError, match="openai:<model>.*scripted:<path.yaml>.*<provider>:<model>"):
        resolve_model(spec)


def test_a_team_from_an_anthropic_spec(env, tmp_path):
    from langchain_anthropic import ChatAnthropic

    from teamgraph import Team

    env.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    team = Team(model="anthropic:claude-sonnet-4-5", home=tmp_path, checkpointer=False)
    team.compile()

    leader = team.runtime.model_for(team.roles["team-leader"])
    member = team.runtime.model_for(team.roles["ui-operator"])
    assert isinstance(leader, ChatAnthropic) and isinstance(member, ChatAnthropic)
    assert leader.thinking is not None and member.thinking is None  # the leader's role thinks deep


def test_resolve_model_returns_chat_models(env, tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("'*': [hi]\n")
    assert isinstance(resolve_model(f"scripted:{path}"), BaseChatModel)
    with pytest.raises(TypeError):
        resolve_model(42)  # type: ignore[arg-type]

"""The main policy: any OpenAI-compatible chat model with tool calling (vLLM, vLLM-Ascend, Ollama, hosted).

- transport errors (connection, timeout, 5xx, 429) and 200 answers whose body is not JSON are retried with
  exponential backoff; nothing else is;
- an answer whose tool calls cannot be parsed gets a format-error observation and is asked again (bounded);
- tool outputs stay whole while the request fits the prompt budget, then are cut oldest first; tokens are counted from usage metadata.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import replace
from typing import Any

import openai
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_openai import ChatOpenAI

from msmigrate.agent.config import LLMSettings, Settings
from msmigrate.agent.gate_results import latest_gate_results
from msmigrate.agent.handoff import compact_target
from msmigrate.agent.policies.base import Decision, EndpointError, PolicyError, PolicyView
from msmigrate.agent.policies.phase_offer import offered_tools, openai_schemas, phase_source_facts
from msmigrate.prompts.fence import fence
from msmigrate.prompts.render import (MEGATRON_NODE_NAMES, knowledge_brief,  # noqa: F401 (runner imports it)
                                     render, render_system)
from msmigrate.core.secret_mask import mask_obj, mask_text

TRANSPORT_ERRORS = (openai.APIConnectionError, openai.APITimeoutError, openai.InternalServerError, openai.RateLimitError)
# A 200 whose body is not a completion (a proxy's HTML page, a cut-off body): the openai client raises
# JSONDecodeError (body labelled JSON) or APIResponseValidationError; langchain-openai raises a plain ValueError
# "Unexpected response type ..." (body labelled otherwise). Retried like transport errors.
BAD_BODY_MARK = "Unexpected response type"


def is_bad_body(exc: BaseException) -> bool:
    return isinstance(exc, (json.JSONDecodeError, openai.APIResponseValidationError)) or (
        type(exc) is ValueError and BAD_BODY_MARK in str(exc))
CHARS_PER_TOKEN = 3.5  # documented estimate; the endpoint's usage metadata is the real count
OLD_TOOL_OUTPUT_CHARS = 600  # what an output cut to fit the budget keeps (its head), first pass
CUT_HARD_CHARS = 120  # second pass, when cutting every output to OLD_TOOL_OUTPUT_CHARS was not enough
# The log shown to the classify prompt: its tail holds the error, its head the launch command and the printed
# arguments / config, the setting a long log's tail alone lacks (the root-cause section carries the error lines)
EXCERPT_CHARS = 4000
EXCERPT_HEAD_CHARS = 1000


def build_chat_model(llm: LLMSettings, settings: Settings) -> ChatOpenAI:
    import os

    api_key = settings.llm_api_key if settings.llm_api_key != "EMPTY" else os.environ.get("OPENAI_API_KEY", "EMPTY")
    return ChatOpenAI(
        base_url=llm.base_url or settings.llm_base_url,
        model=llm.model or settings.llm_model,
        api_key=api_key,
        temperature=llm.temperature,
        timeout=llm.timeout_s,
        max_retries=0,  # we retry transport errors ourselves, and only those
    )


def prompt_vars(view: PolicyView) -> dict[str, Any]:
    st = view.state
    phase = view.phase
    return {
        "phase": phase,
        "model_name": view.ctx.model_name,
        "attempt": int(st.get("attempts", {}).get(phase, 0)) + 1,
        # budgets.phase_attempts counts the failures a phase may repair: its first visit plus that many retries
        "max_attempts": int(st.get("max_attempts") or 4) + 1,
        "source_summary": phase_source_facts(phase, st.get("source_summary", {})),
        "target_summary": compact_target(st.get("target_summary") or {}),
        # the prompts say ``branch`` for what the plan node calls ``data_branch``
        "plan": {**st["plan"], "branch": st["plan"].get("data_branch")} if st.get("plan") else {},
        "gate_results": latest_gate_results(st.get("gates", {}), st.get("gate_history") or []),
        "last_failure": st.get("last_failure"),
        "instructions": st.get("instructions", ""),
        "handoff": st.get("handoff") or [],
    }


def phase_prompt(phase: str, backend: str | None) -> str:
    """The node template of ``phase`` on the plan's route: the Megatron route has its own work-phase prompts."""
    return f"megatron_{phase}" if backend == "megatron" and f"megatron_{phase}" in MEGATRON_NODE_NAMES else phase


def system_vars(view: PolicyView, knowledge_index: str) -> dict[str, Any]:
    return {
        "model_name": view.ctx.model_name,
        "source_path": str(view.ctx.source),
        "target_path": str(view.ctx.target),
        "editable_paths": view.ctx.editable_paths,
        "knowledge_index": knowledge_index,
        "tools": [{"name": t.name, "description": t.description} for t in view.tools],
    }


def format_error_text(call: dict[str, Any], tools: list[Any]) -> str:
    """The format-error observation for one unparseable tool call: what was sent and the schema it must match."""
    name = call.get("name") or ""
    tool = next((t for t in tools if t.name == name), None)
    if tool is None:
        schema = json.dumps({"known_tools": [t.name for t in tools]})
        error = call.get("error") or f"unknown tool {name!r}"
    else:
        schema = json.dumps(tool.tool_call_schema.model_json_schema(), indent=1)
        error = call.get("error") or "the arguments are not valid JSON"
    return render("format_error", tool_name=name or "(none)", error=str(error),
                  schema=schema, raw_call=str(call.get("args"))[:2000])


def fit_history(messages: list[AnyMessage], budget_tokens: int, fixed_chars: int) -> list[AnyMessage]:
    """Keep every tool output whole while the request fits ``budget_tokens``; over it, cut tool outputs oldest
    first (to a head of OLD_TOOL_OUTPUT_CHARS, then to CUT_HARD_CHARS) until it fits. A model that re-reads a file
    because its first read was cut for no reason wastes a request. The newest turn's outputs are never cut: the
    model has not seen them yet (a live run re-read a file whose first read was cut before it ever saw it)."""
    out: list[AnyMessage] = list(messages)
    calls = {c["id"]: c for m in messages if isinstance(m, AIMessage) for c in m.tool_calls}
    limit_chars = budget_tokens * CHARS_PER_TOKEN
    size = fixed_chars + sum(len(str(m.content)) for m in out)
    newest = max((i for i, m in enumerate(out) if isinstance(m, AIMessage)), default=-1)
    tool_idx = [i for i, m in enumerate(out) if isinstance(m, ToolMessage) and i < newest]
    for limit in (OLD_TOOL_OUTPUT_CHARS, CUT_HARD_CHARS):
        for i in tool_idx:
            if size <= limit_chars:
                return out
            content = str(messages[i].content)  # cut the original, so the marker counts every cut char
            if len(content) > limit:
                cut = content[:limit] + cut_marker(len(content) - limit, calls.get(messages[i].tool_call_id),
                                                   content[:limit])
                if len(cut) >= len(str(out[i].content)):  # already this short (or the note would not save chars)
                    continue
                size -= len(str(out[i].content)) - len(cut)
                out[i] = out[i].model_copy(update={"content": cut})
    return out


NUMBERED_LINE = re.compile(r"(?:^|\\n|\n|\"text\": \")(\d+): ")  # read_file's "N: text" lines, JSON-escaped


def cut_marker(chars_cut: int, call: dict[str, Any] | None, kept: str) -> str:
    """The note that ends a cut output: how much was cut and the call that shows it again (the same tool and
    arguments; for ``read_file``, starting at the last line the kept head reached), so the model can re-read just
    what it needs instead of guessing what the cut held."""
    note = f" …[cut: {chars_cut} chars, to fit the prompt budget"
    if not call or not call.get("name"):
        return note + "]"
    args = dict(call.get("args") or {})
    if call["name"] == "read_file":
        lines = NUMBERED_LINE.findall(kept)
        if lines:
            args["start"] = int(lines[-1])
    return note + f"; to see it again call {call['name']} {json.dumps(args, ensure_ascii=False)}]"


def fence_tool_outputs(messages: list[AnyMessage]) -> list[AnyMessage]:
    """Tool results carry source files, logs and probe output: each goes to the model inside a data fence."""
    return [m.model_copy(update={"content": fence(str(m.content), f"tool result {m.name or ''}".strip())})
            if isinstance(m, ToolMessage) else m for m in messages]


class LLMPolicy:
    name = "llm"

    def __init__(self, chat_model: Any, llm: LLMSettings, knowledge_index: str = "", sleep=time.sleep):
        self.chat_model = chat_model
        self.llm = llm
        self.knowledge_index = knowledge_index
        self._sleep = sleep

    def _invoke(self, bound: Any, messages: list[AnyMessage]) -> AIMessage:
        delay = 1.0
        for attempt in range(self.llm.max_transport_retries + 1):
            try:
                return bound.invoke(messages)
            except (*TRANSPORT_ERRORS, ValueError) as exc:
                bad_body = isinstance(exc, ValueError)
                if bad_body and not is_bad_body(exc):
                    raise  # a ValueError of our own making is a bug, not the endpoint
                if attempt == self.llm.max_transport_retries:
                    what = "answered with a body that is not a chat completion" if bad_body else "unavailable"
                    raise EndpointError(mask_text(f"LLM endpoint {what} after {attempt + 1} tries: "
                                                f"{str(exc)[:300]}")) from exc
                self._sleep(delay)
                delay = min(delay * 2, 30.0)
        raise AssertionError("unreachable")

    def decide(self, view: PolicyView) -> Decision:
        # the plan's route picks the prompts (each route's contract) and the tools its phases can use
        backend = (view.state.get("plan") or {}).get("backend")
        tools = offered_tools(view.phase, view.tools, backend)
        view = replace(view, tools=tools)
        system = SystemMessage(render_system(backend, **system_vars(view, self.knowledge_index)))
        node = HumanMessage(render(phase_prompt(view.phase, backend), **prompt_vars(view)))
        schemas = openai_schemas(tools)
        # the schemas go with every request too: the budget is the whole request's, not the messages'
        fixed = len(str(system.content)) + len(str(node.content)) + len(json.dumps(schemas))
        history = fence_tool_outputs(fit_history(view.messages, self.llm.prompt_budget_tokens, fixed))
        bound = self.chat_model.bind_tools(schemas)
        # secrets masked by value in everything sent (a tool output or a log could carry one)
        convo: list[AnyMessage] = [mask_obj(m) for m in (system, node, *history)]
        tokens = format_errors = requests = prompt_chars = 0
        schema_chars = len(json.dumps(schemas))
        for _ in range(self.llm.max_format_retries + 1):
            requests += 1
            prompt_chars += schema_chars + sum(len(str(m.content)) for m in convo)
            reply = self._invoke(bound, convo)
            usage = getattr(reply, "usage_metadata", None) or {}
            tokens += int(usage.get("total_tokens", 0))
            if not reply.invalid_tool_calls:
                # what bench_llm_run.py reads back from the trajectory: requests and prompt size per decision
                return Decision(message=reply, tokens=tokens, format_errors=format_errors,
                                notes={"requests": requests, "prompt_chars": prompt_chars,
                                       "tool_schema_chars": schema_chars,
                                       "prompt_tokens": int(usage.get("input_tokens", 0))})
            format_errors += 1
            # The bad reply goes back as plain text: an assistant turn that still carried tool_calls (even in
            # additional_kwargs) without matching tool results is rejected by OpenAI-compatible servers.
            convo += [
                AIMessage(content=str(reply.content or "(tool call with unparseable arguments)")),
                HumanMessage("\n\n".join(format_error_text(c, view.tools) for c in reply.invalid_tool_calls)),
            ]
        raise PolicyError(f"model produced malformed tool calls {format_errors} times in a row")

    def classify(self, failure_text: str, view: PolicyView,
                 evidence: dict[str, Any] | None = None) -> dict[str, Any] | None:
        """LLM verdict when the failure catalog abstained: the prompt carries the extracted root cause, the closest
        candidate cases and the owner semantics; the answer is one JSON object (case_id, owner, reason). A view
        without any gate run (a log classified outside a run, as scripts/knowledge_accuracy.py does) gets the prompt
        without the run's sections: no plan, gates, attempt or hand-off stand in for ones that do not exist."""
        values = prompt_vars(view)  # the failure being classified is not in the state yet: show its text
        # (fresh, not merged with an earlier failure's verdict: that case/owner would mislead the model)
        values["last_failure"] = {"case_id": None, "owner": None, "diagnosis": "not classified yet",
                                  "excerpt": log_excerpt(failure_text), **(evidence or {}),
                                  "outside_run": not view.state.get("gate_history")}
        prompt = mask_text(render("classify", **values))
        reply = self._invoke(self.chat_model, [HumanMessage(prompt)])
        answer = parse_classify_answer(str(reply.content), evidence)
        if answer is not None:  # what this request cost: counted with the run's tokens, read by bench_llm_run.py
            usage = getattr(reply, "usage_metadata", None) or {}
            answer.update(tokens=int(usage.get("total_tokens", 0)), requests=1, prompt_chars=len(prompt))
        return answer


def log_excerpt(text: str, limit: int = EXCERPT_CHARS, head: int = EXCERPT_HEAD_CHARS) -> str:
    """``text`` when it fits in ``limit`` characters; else its first ``head`` and last ``limit - head`` characters,
    cut at line ends, with a line saying how many lines were left out between them."""
    if len(text) <= limit:
        return text
    start = text[:head].rsplit("\n", 1)[0] if "\n" in text[:head] else text[:head]
    tail = text[-(limit - head):]
    tail = tail.split("\n", 1)[1] if "\n" in tail[:-1] else tail
    left_out = text[len(start):len(text) - len(tail)].strip("\n").count("\n") + 1
    return f"{start}\n[... {left_out} lines left out ...]\n{tail}"


OWNER_WORDS = ("model", "data", "config", "environment")
ABSTAIN_WORDS = ("unknown", "undecided", "none")


def _owners_that_fit(value: Any) -> list[str]:
    """The answer's ``fits``: the owners the model says the evidence leaves possible (known owner words only, in its
    order, no repeats); anything else in the field is ignored."""
    items = value if isinstance(value, list) else [value] if isinstance(value, str) else []
    fits: list[str] = []
    for item in items:
        word = str(item).strip().lower()
        if word in OWNER_WORDS and word not in fits:
            fits.append(word)
    return fits


def parse_classify_answer(text: str, evidence: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """Read the model's classification: the JSON object the prompt asks for; failing that, the owner the reply
    names first ("config, not the model" → config). A case id is kept only if it was one of the candidates.
    Owner "unknown" in the JSON is the model abstaining: owner None, method "llm-abstain", its reason kept."""
    known = {c.get("case_id") for c in (evidence or {}).get("candidates", [])}
    found = re.search(r"\{.*\}", text, re.S)
    if found:
        try:
            answer = json.loads(found.group(0))
        except ValueError:
            answer = None
        owner = str(answer.get("owner", "")).strip().lower() if isinstance(answer, dict) else ""
        fits = _owners_that_fit(answer.get("fits")) if isinstance(answer, dict) else []
        if owner in ABSTAIN_WORDS:  # the model says the evidence does not decide: an abstention, not an owner
            return {"owner": None, "case_id": None, "method": "llm-abstain", "llm_answer": text[:2000],
                    "diagnosis": str(answer.get("reason", ""))[:1200] or text[:600], "fits": fits}
        if isinstance(answer, dict) and owner in OWNER_WORDS:
            case_id = str(answer.get("case_id") or "").strip()
            return {"owner": str(answer["owner"]).strip().lower(), "case_id": case_id if case_id in known else None,
                    "diagnosis": str(answer.get("reason", ""))[:1200] or text[:600], "method": "llm",
                    "llm_answer": text[:2000], "fits": fits or [owner]}
    lowered = text.lower()
    hits = [(lowered.find(owner), owner) for owner in OWNER_WORDS if owner in lowered]
    if hits:
        return {"owner": min(hits)[1], "case_id": None, "diagnosis": text[:600], "method": "llm",
                "llm_answer": text[:2000]}
    return None

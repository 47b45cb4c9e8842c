"""Summary of a Hugging Face model folder: what the migration needs to know before writing a plugin.

Static reads only (JSON, Jinja text, ``ast`` of custom ``modeling_*.py``). The one dynamic fact, the forward
signature of a transformers-native class, comes from the ``forward_signature`` probe run in the *target runtime*
Python, so this process never imports transformers. Text read from the folder is data, never instructions.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

from msmigrate.core.source_derivation import derive
from msmigrate.core.tool_result import ToolResult
from msmigrate.tools.repo_reader.attention_facts import remote_attention_facts
from msmigrate.tools.runtime import run_probe

SIZE_KEYS = ("hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "intermediate_size",
             "vocab_size", "max_position_embeddings", "head_dim", "depth", "embed_dim", "hidden_act", "patch_size",
             "temporal_patch_size", "spatial_merge_size", "image_size", "out_hidden_size", "num_channels",
             "tie_word_embeddings", "torch_dtype", "dtype", "rope_scaling", "num_experts", "num_local_experts",
             "moe_intermediate_size", "num_experts_per_tok", "projector_hidden_act", "vision_feature_layer")
MEDIA_RX = re.compile(r"image|video|audio|vision|img|patch|frame|pixel|<\|?(box|quad|ref)", re.IGNORECASE)
PROCESSOR_FILES = ("processor_config.json", "preprocessor_config.json", "video_preprocessor_config.json",
                   "chat_template.json")
MAX_TEMPLATE_CHARS = 4000


def _load_json(path: Path) -> tuple[dict | None, str | None]:
    if not path.is_file():
        return None, None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        return None, f"{path.name}: invalid JSON ({exc})"
    return (data if isinstance(data, dict) else None), None


def _sizes(cfg: dict) -> dict:
    out = {k: cfg[k] for k in SIZE_KEYS if k in cfg}
    out.update({k: v for k, v in cfg.items() if k.endswith(("_token_id", "_token_index")) and isinstance(v, int)})
    return out


# PretrainedConfig's own bookkeeping and generation defaults, which older saved sub-configs repeat: never a size
CONFIG_BOOKKEEPING = frozenset((
    "return_dict", "output_hidden_states", "output_attentions", "torchscript", "use_bfloat16", "tf_legacy_loss",
    "tie_encoder_decoder", "is_decoder", "is_encoder_decoder", "add_cross_attention", "chunk_size_feed_forward",
    "max_length", "min_length", "do_sample", "early_stopping", "num_beams", "num_beam_groups", "diversity_penalty",
    "temperature", "top_k", "top_p", "typical_p", "repetition_penalty", "length_penalty", "no_repeat_ngram_size",
    "encoder_no_repeat_ngram_size", "num_return_sequences", "output_scores", "return_dict_in_generate",
    "remove_invalid_values", "problem_type", "finetuning_task", "tokenizer_class", "prefix", "model_type",
    "transformers_version", "_name_or_path", "architectures"))
MIN_KNOWN_SIZES = 3
MAX_OTHER_SIZES = 12


def _sub_sizes(sub: dict) -> dict:
    """A (sub-)config's sizes. Where the common names say little (a remote-code projector with ``n_embed`` /
    ``input_dim``, a vision tower with ``width`` / ``layers`` / ``heads``, an OLMo-style flat config with
    ``d_model`` / ``n_layers`` / ``embedding_size``), its other scalar entries too, so the summary does not look as
    if the config held nothing."""
    out = _sizes(sub)
    # token ids and dtype say nothing about the shapes; count the size names only
    if sum(1 for k in out if k in SIZE_KEYS and k not in ("dtype", "torch_dtype")) < MIN_KNOWN_SIZES:
        other = [(k, v) for k, v in sub.items() if k not in out and k not in CONFIG_BOOKKEEPING
                 and isinstance(v, (int, float, str)) and not (isinstance(v, str) and len(v) > 80)]
        out.update(other[:MAX_OTHER_SIZES])
    return out


def config_facts(cfg: dict) -> dict:
    subs = {k: {"model_type": v.get("model_type"), **_sub_sizes(v)} for k, v in cfg.items()
            if k.endswith("_config") and isinstance(v, dict) and k != "quantization_config"}
    return {"architectures": cfg.get("architectures") or [], "model_type": cfg.get("model_type"),
            "auto_map": cfg.get("auto_map") or {}, "sizes": _sub_sizes(cfg), "sub_configs": subs,
            "transformers_version": cfg.get("transformers_version")}


def token_facts(folder: Path, errors: list[str]) -> dict:
    tok_cfg, err = _load_json(folder / "tokenizer_config.json")
    errors += [err] if err else []
    stm, err = _load_json(folder / "special_tokens_map.json")
    errors += [err] if err else []
    added, err = _load_json(folder / "added_tokens.json")
    errors += [err] if err else []
    tok_cfg, stm, added = tok_cfg or {}, stm or {}, added or {}
    special: dict[str, object] = {}
    for key in ("bos_token", "eos_token", "pad_token", "unk_token", "image_token", "video_token", "audio_token"):
        val = tok_cfg.get(key, stm.get(key))
        if isinstance(val, dict):
            val = val.get("content")
        if val is not None:
            special[key] = val
    vocab_added: dict[str, int] = {}
    for tid, entry in (tok_cfg.get("added_tokens_decoder") or {}).items():
        if isinstance(entry, dict) and "content" in entry and str(tid).isdigit():
            vocab_added[entry["content"]] = int(tid)
    vocab_added.update({k: v for k, v in added.items() if isinstance(v, int)})
    # transformers 5 keeps added tokens only in tokenizer.json ("added_tokens": [{"id", "content", ...}]).
    fast, err = _load_json(folder / "tokenizer.json")
    errors += [err] if err else []
    for entry in (fast or {}).get("added_tokens") or []:
        if isinstance(entry, dict) and isinstance(entry.get("id"), int) and isinstance(entry.get("content"), str):
            vocab_added.setdefault(entry["content"], entry["id"])
    extra = tok_cfg.get("extra_special_tokens") or stm.get("additional_special_tokens") or []
    extra_names = list(extra.values()) if isinstance(extra, dict) else list(extra)
    extra_names = [e.get("content") if isinstance(e, dict) else e for e in extra_names]
    media = {t: vocab_added.get(t) for t in sorted(set(vocab_added) | {e for e in extra_names if isinstance(e, str)})
             if MEDIA_RX.search(t)}
    return {"special_tokens": special, "media_tokens": media, "added_tokens_count": len(vocab_added),
            "tokenizer_class": tok_cfg.get("tokenizer_class"), "processor_class": tok_cfg.get("processor_class"),
            "model_max_length": tok_cfg.get("model_max_length"), "_tok_cfg": tok_cfg}


def chat_template_facts(folder: Path, tok_cfg: dict, errors: list[str]) -> dict:
    text, source = None, None
    if (folder / "chat_template.jinja").is_file():
        text, source = (folder / "chat_template.jinja").read_text(encoding="utf-8", errors="replace"), \
            "chat_template.jinja"
    elif (folder / "chat_template.json").is_file():
        data, err = _load_json(folder / "chat_template.json")
        errors += [err] if err else []
        text, source = (data or {}).get("chat_template"), "chat_template.json"
    elif tok_cfg.get("chat_template"):
        text, source = tok_cfg["chat_template"], "tokenizer_config.json"
    if isinstance(text, list):  # named templates: [{"name": "default", "template": "..."}]
        named = {t.get("name"): t.get("template") for t in text if isinstance(t, dict)}
        text = named.get("default") or next(iter(named.values()), None)
    if not isinstance(text, str):
        return {"source": None, "chars": 0, "text": None, "truncated": False}
    return {"source": source, "chars": len(text), "text": text[:MAX_TEMPLATE_CHARS],
            "truncated": len(text) > MAX_TEMPLATE_CHARS}


def _class_forward(tree: ast.Module, cls_name: str, seen: set[str] | None = None) -> tuple[str, int, str] | None:
    """(owner class, line, signature) of ``forward`` on ``cls_name`` or its same-file bases."""
    seen = seen or set()
    classes = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}
    node = classes.get(cls_name)
    if node is None or cls_name in seen:
        return None
    seen.add(cls_name)
    for item in node.body:
        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name == "forward":
            ret = f" -> {ast.unparse(item.returns)}" if item.returns else ""
            return cls_name, item.lineno, f"forward({ast.unparse(item.args)}){ret}"
    for base in node.bases:
        found = _class_forward(tree, ast.unparse(base).split(".")[-1], seen)
        if found:
            return found
    return None


def _self_attrs(fn: ast.AST, ctx: type) -> dict[str, int]:
    """``self.<attr>`` names used in ``fn`` with the given context (Load/Store), first line each."""
    out: dict[str, int] = {}
    for n in ast.walk(fn):
        if isinstance(n, ast.Attribute) and isinstance(n.ctx, ctx) and isinstance(n.value, ast.Name) and \
                n.value.id == "self":
            out.setdefault(n.attr, n.lineno)
    return out


def caller_set_attributes(tree: ast.Module, cls_name: str) -> list[dict]:
    """Attributes the caller must set before ``forward``: ``__init__`` assigns ``self.<attr> = None``, ``forward``
    reads it and never assigns it (InternVL-style ``img_context_token_id``, which only its ``chat`` helper sets). A
    plugin built by the framework is never given it, so the source's own code is the evidence, read by AST."""
    node = next((n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == cls_name), None)
    if node is None:
        return []
    methods = {m.name: m for m in node.body if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))}
    init, forward = methods.get("__init__"), methods.get("forward")
    if init is None or forward is None:
        return []
    nones = {t.attr: a.lineno for a in ast.walk(init) if isinstance(a, ast.Assign)
             and isinstance(a.value, ast.Constant) and a.value.value is None
             for t in a.targets if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name)
             and t.value.id == "self"}
    reads, writes = _self_attrs(forward, ast.Load), _self_attrs(forward, ast.Store)
    out = []
    for attr in sorted(set(nones) & set(reads) - set(writes)):
        setters = sorted(name for name, m in methods.items()
                         if name not in ("__init__", "forward") and attr in _self_attrs(m, ast.Store))
        out.append({"attribute": attr, "none_in_init_line": nones[attr], "read_in_forward_line": reads[attr],
                    "set_only_by": setters})
    return out


def _auto_map_refs(auto_map: dict) -> list[tuple[str, str]]:
    """(module file, class) pairs named by auto_map; values may be lists (tokenizers) or ``repo--module.Class``."""
    out = []
    for value in auto_map.values():
        for ref in value if isinstance(value, list) else [value]:
            if isinstance(ref, str) and "." in ref:
                module, cls = ref.split("--")[-1].rsplit(".", 1)
                if "/" not in module and ".." not in module:
                    out.append((module + ".py", cls))
    return out


def static_forward_signature(folder: Path, arch: str, auto_map: dict) -> dict | None:
    """Forward signature of ``arch`` from the folder's custom code, found via auto_map or by scanning modeling_*.py."""
    candidates = [f for f, cls in _auto_map_refs(auto_map) if cls == arch]
    candidates += sorted(p.name for p in folder.glob("modeling_*.py"))
    for fname in dict.fromkeys(candidates):
        path = folder / fname
        if not path.is_file():
            continue
        try:
            tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"), filename=fname)
        except SyntaxError:
            continue
        found = _class_forward(tree, arch)
        if found:
            out = {"source": "static", "file": fname, "class": arch, "defined_in": found[0], "line": found[1],
                   "signature": found[2]}
            caller_set = caller_set_attributes(tree, found[0])
            if caller_set:  # None after the build and read by forward: whoever calls forward must set it
                out["caller_must_set"] = caller_set
            return out
    return None


def hf_summary(folder: Path, runtime_python: str | None = None, probe_timeout: float = 180.0) -> ToolResult:
    """Summarise an HF model folder; with ``runtime_python``, probe transformers-native forward signatures."""
    folder = Path(folder)
    if not folder.is_dir():
        return ToolResult.failure(f"{folder} is not a directory")
    cfg, err = _load_json(folder / "config.json")
    if cfg is None:
        return ToolResult.failure(err or f"{folder} has no config.json; not a Hugging Face model folder")
    errors: list[str] = []
    facts = config_facts(cfg)
    tokens = token_facts(folder, errors)
    template = chat_template_facts(folder, tokens.pop("_tok_cfg"), errors)
    processors = {}
    for name in PROCESSOR_FILES[:3]:
        data, err = _load_json(folder / name)
        errors += [err] if err else []
        if data is not None:
            processors[name] = {k: v for k, v in data.items() if not isinstance(v, (list, dict)) or len(str(v)) < 400}
    custom_files = sorted(p.name for p in folder.glob("*.py"))
    referenced = sorted({f for f, _ in _auto_map_refs(facts["auto_map"])})
    weights = sorted(p.name for p in folder.iterdir() if p.suffix in (".safetensors", ".bin") and p.is_file())
    forward = None
    arch = facts["architectures"][0] if facts["architectures"] else None
    failures: list[str] = []  # derivations from the source's code that failed: facts, never a crash (plan shows them)
    if arch:
        found = derive("the forward signature (remote code, read by AST)", static_forward_signature, folder, arch,
                       facts["auto_map"])
        forward, failures = found.value, failures + ([found.failure] if found.failure else [])
        if forward is None and runtime_python:
            probe = run_probe(runtime_python, "forward_signature", [arch], env_extra={"HF_HUB_OFFLINE": "1"},
                              timeout=probe_timeout)
            if probe.ok:
                forward = {"source": "probe", **probe.data["result"]}
            else:
                forward = {"source": "probe", "error": probe.error,
                           "stderr_tail": probe.data.get("stderr_tail", "")[-800:]}
    # remote code: which PreTrainedModel classes it builds and the attention each declares (transformers refuses a
    # requested sdpa / flash attention on a nested one that does not declare it, at build time)
    attention = None
    if facts["auto_map"] and custom_files:
        found = derive("the attention facts of the remote code", remote_attention_facts, folder, arch)
        attention, failures = found.value, failures + ([found.failure] if found.failure else [])
    return ToolResult.success(
        **({"remote_attention": attention} if attention else {}),
        **({"could_not_derive": failures} if failures else {}),
        folder=str(folder), **facts, custom_code_files=custom_files,
        auto_map_files_missing=[f for f in referenced if f not in custom_files],
        needs_trust_remote_code=bool(facts["auto_map"]), tokens=tokens, chat_template=template,
        processor_configs=processors, weight_files=weights[:20], weight_files_count=len(weights),
        forward=forward, read_errors=errors,
    )

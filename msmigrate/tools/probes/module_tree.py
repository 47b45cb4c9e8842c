"""Probe: the module tree of a model built on the meta device (no weights, no memory).

    python module_tree.py --model <hf folder> [--trust-remote-code] [--shrink-layers N]
    python module_tree.py --target <root> --plugin <entry> ... --model-id <id> [--model-name-or-path <dir>]

Result: ``names`` (every ``named_modules()`` name, root "" included, in order), ``patterns`` (names with layer
indices as ``{*}`` -> count, e.g. ``model.language_model.layers.{*}: 2``), ``classes`` (name -> class name),
``no_split_modules`` (union over the PreTrainedModel parts), ``accepts_past_key_values`` (class -> whether its forward
takes ``past_key_values`` or ``**kwargs``: what a recompute wrapper that injects ``past_key_values=None`` needs,
contract §13 #29; false where a decorator renames it to a parameter the block's caller fills by position:
``past_key_values_renamed``, class -> that parameter, ``_recompute_clash.py``), ``accepts_var_kwargs`` (class -> forward has ``**kwargs``), ``model_class``, ``build``,
``tied_parameters`` (groups of parameter names that are one Parameter in the built model) and ``tied_embeddings``
(the input and output embeddings share their weight), ``loss_without_labels`` (its forward calls
``self.loss_function`` with ``labels=None``: it computes its own targets, ``_loss_call.py``), ``param_count``
(parameters of the built model, each shared one
once), ``embedding_params`` (the input embedding's), ``text_layers`` / ``text_hidden`` (the language model's layer count
and width, from its config: the report's FLOPs per token). Ties are read from the built model, not from config.json:
a config saved by transformers 4.x leaves ``tie_word_embeddings`` out when it equals the class default (Gemma 3).
``attention_support``: the attention implementations every PreTrainedModel of the built model declares
(``supported``, eager always) and, per implementation, the classes that do not (``lacks``): transformers refuses a
requested implementation at build time on each such class ("does not support an attention implementation through
torch.nn.functional.scaled_dot_product_attention yet"), and the probe builds with eager, so it sees them all.
``capture_lost``: sub-models whose hook-based output capture does not survive FSDP2's ``fully_shard``, which swaps a
module's class for a generated subclass: transformers 5 keys each model's ``_can_record_outputs`` by the class's name,
so a sharded vision tower returns ``hidden_states=None`` to a parent that reads a feature layer from them. Measured
by swapping each class the same way on the meta model, not assumed.
"""
import re
import sys
import time

from _model_build import emit, error_with_place, forward_params, instantiate, parse, resolve, shrink_config
from _loss_call import passes_no_labels
from _recompute_clash import past_key_values_clashes


def embeddings_tied(model):
    """Whether the input and output embeddings hold one weight (False where the model has no such pair)."""
    try:
        inp, out = model.get_input_embeddings(), model.get_output_embeddings()
    except (AttributeError, NotImplementedError):
        return False
    weight_in, weight_out = getattr(inp, "weight", None), getattr(out, "weight", None)
    return weight_in is not None and weight_in is weight_out


# attention implementation -> the class flags that declare it (transformers 4.x and 5.x spellings)
ATTN_FLAGS = {"sdpa": ("_supports_sdpa",), "flash_attention_2": ("_supports_flash_attn", "_supports_flash_attn_2")}


def attention_support(model):
    """``{supported, lacks}`` read off the built modules' own flags (a remote-code class's, or transformers')."""
    lacks = {}
    for module in model.modules():
        if not hasattr(module, "_supports_sdpa") or not hasattr(module, "config"):
            continue  # not a PreTrainedModel: transformers checks the implementation on those only
        for impl, flags in ATTN_FLAGS.items():
            if not any(getattr(module, f, False) is True for f in flags):
                names = lacks.setdefault(impl, [])
                if type(module).__name__ not in names:
                    names.append(type(module).__name__)
    return {"supported": ["eager"] + [impl for impl in ATTN_FLAGS if impl not in lacks], "lacks": lacks}


def capture_lost(model):
    """Names of the sub-models (the root is wrapped whatever the plan says) whose output-capture settings are not
    found any more once their class is swapped for a subclass, as ``fully_shard`` does."""
    try:
        from transformers.utils.output_capturing import _CAN_RECORD_REGISTRY as registry
    except ImportError:  # transformers 4.x reads the settings off the class: a subclass inherits them
        return []
    lost = []
    for name, module in model.named_modules():
        if not name or not hasattr(module, "config"):
            continue
        before = registry.get(module)
        if not before:
            continue
        cls = type(module)
        module.__class__ = type("FSDP" + cls.__name__, (cls,), {})
        try:
            after = registry.get(module)
        finally:
            module.__class__ = cls
        if after != before:
            lost.append(name)
    return lost


def size_facts(model, config):
    """Parameter counts (meta tensors have sizes) and the text decoder's depth and width for FLOPs per token."""
    total = sum(p.numel() for p in model.parameters())
    try:
        emb = model.get_input_embeddings()
    except (AttributeError, NotImplementedError):
        emb = None
    weight = getattr(emb, "weight", None)
    text = getattr(config, "text_config", None) or getattr(config, "llm_config", None) or config
    return {"param_count": total, "embedding_params": int(weight.numel()) if weight is not None else 0,
            "text_layers": getattr(text, "num_hidden_layers", None), "text_hidden": getattr(text, "hidden_size", None)}


def main(argv):
    args = parse(argv, lambda ap: ap.add_argument("--shrink-layers", type=int, default=0))
    start = time.monotonic()
    try:
        cls, config, how = resolve(args)
        if args.shrink_layers and how == "transformers":
            shrink_config(config, args.shrink_layers)
        model = instantiate(cls, config, meta=True)
    except Exception as exc:  # probe boundary: the failure is the result
        emit({"error": error_with_place(exc)})  # where it was raised: whose file decides the owner
        return 1
    names, classes, no_split, accepts_pkv, var_kwargs, renamed = [], {}, [], {}, {}, {}
    for name, module in model.named_modules():
        names.append(name)
        cname = type(module).__name__
        classes[name] = cname
        for item in getattr(module, "_no_split_modules", None) or []:
            if item not in no_split:
                no_split.append(item)
        if cname not in accepts_pkv:
            params, var_kw = forward_params(type(module))
            clash = past_key_values_clashes(model, name) if var_kw and "past_key_values" not in params else None
            accepts_pkv[cname] = ("past_key_values" in params or var_kw) and clash is None
            var_kwargs[cname] = var_kw
            if clash:
                renamed[cname] = clash
    tied_groups = {}
    for pname, param in model.named_parameters(remove_duplicate=False):
        tied_groups.setdefault(id(param), []).append(pname)
    tied = [group for group in tied_groups.values() if len(group) > 1]
    # the same tree with every layer index as {*} (the apply_modules pattern syntax), with how many modules each has
    patterns = {}
    for name in names:
        pattern = re.sub(r"(?<=\.)\d+(?=\.|$)", "{*}", name)
        patterns[pattern] = patterns.get(pattern, 0) + 1
    emit({
        "names": names, "patterns": patterns, "classes": classes, "no_split_modules": no_split, "accepts_past_key_values": accepts_pkv,
        "accepts_var_kwargs": var_kwargs, "past_key_values_renamed": renamed, "model_class": f"{cls.__module__}.{cls.__qualname__}", "build": how,
        "tied_parameters": tied, "tied_embeddings": embeddings_tied(model), "num_modules": len(names),
        "loss_without_labels": passes_no_labels(type(model)),
        "attention_support": attention_support(model), "capture_lost": capture_lost(model),
        **size_facts(model, config), "seconds": round(time.monotonic() - start, 2),
    })
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Layer specs picked by each sub-module's ``model_id`` (the real ones return megatron ModuleSpecs; the stand-in's
say which biases its one layer type carries). An id missing here gets no spec (None), as in the real tables."""


def get_qwen2vl_layer_spec(config, is_vit=True, *args, **kwargs):
    return {"qkv_bias": True, "proj_bias": True, "mlp_bias": True}


def get_qwen2_5_vit_layer_spec(config, is_vit=True, *args, **kwargs):
    return get_qwen2vl_layer_spec(config, is_vit)


def get_qwen2vl_llm_layer_spec(config, is_vit=False, *args, **kwargs):
    return {"qkv_bias": getattr(config, "add_qkv_bias", False), "proj_bias": False,
            "mlp_bias": getattr(config, "add_bias_linear", False)}


def get_mlp_module_spec(config, use_te=False, *args, **kwargs):
    class _Spec:
        submodules = {"bias": getattr(config, "add_bias_linear", True)}
    return _Spec()


vit_layer_specs = {'qwen2vit': get_qwen2vl_layer_spec,
                   'qwen2_5_vit': get_qwen2_5_vit_layer_spec}

llm_layer_specs = {'qwen2lm': get_qwen2vl_llm_layer_spec,
                   'qwen2_5_lm': get_qwen2vl_llm_layer_spec}

projector_layer_specs = {'lnmlp': get_mlp_module_spec, 'mlp': get_mlp_module_spec}


def get_vit_layer_spec(config, *args, **kwargs):
    if getattr(config, 'model_id', None) in vit_layer_specs:
        return vit_layer_specs[config.model_id](config, is_vit=True)
    return None


def get_llm_layer_spec(config, *args, **kwargs):
    if getattr(config, 'model_id', None) in llm_layer_specs:
        return llm_layer_specs[config.model_id](config, is_vit=False)
    return None


def get_projector_layer_spec(config, *args, **kwargs):
    if getattr(config, 'model_id', None) in projector_layer_specs:
        return projector_layer_specs[config.model_id](config, use_te=False).submodules
    return None

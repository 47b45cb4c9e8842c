"""The facts that decide between two owners name an answer where the tuning half showed the LLM torn between two."""

from msmigrate.knowledge.owners import DECIDING_FACTS


def _fact(opening: str) -> str:
    (fact,) = [f for f in DECIDING_FACTS if f.startswith(opening)]
    return fact


def test_weights_that_do_not_fit_default_to_the_model_when_no_setting_is_shown():
    fact = _fact("Weights that do not fit the built model")
    assert "When the log shows no such count or setting, the module definition or its loading code is what must " \
           "change: model." in fact
    assert "a dimension exactly 1/N of the other" in fact  # what a parallel-size setting looks like in the shapes
    # a vocabulary / class / frame count in the mismatch is set by the data or an argument, not by the module
    assert "a vocabulary or dictionary size, a number of classes, frames or positions" in fact
    assert "data or config, not the module" in fact


def test_code_written_for_another_library_release_is_environment_when_that_release_is_the_fix():
    fact = _fact("Whose code raises or lacks the thing")
    assert "Code written for another release of a library it calls" in fact
    assert "environment when the fix is installing that release" in fact
    assert "installed or run from its source checkout) is environment" in fact  # a framework's script, not the run's


def test_a_datasets_own_definition_file_is_data_and_the_path_to_it_config():
    fact = _fact("A dataset's own definition file")
    assert "is data; the training YAML's or argument's path pointing at it is config" in fact


def test_an_installed_librarys_class_lacking_an_option_is_config_not_model():
    fact = _fact("Parameters without gradients under DDP")
    assert "A class of an installed library" in fact and "is not code the migration changes: config" in fact


def test_an_unknown_model_type_points_at_the_checked_registry_fact():
    fact = _fact("A model type or architecture the libraries do not know")
    assert "checked facts say whether the installed transformers registers the type" in fact
    assert "'does not recognize this architecture' means no code was found" in fact


def test_an_absent_file_at_a_well_formed_path_is_data_and_an_unfetchable_hub_repo_environment():
    fact = _fact("A file that does not exist or cannot be read")
    assert "A well-formed path to a dataset or media file that is absent means the file itself is missing: data" in fact
    assert "A Hub repository or file that cannot be fetched" in fact and "environment, unless the repository id" in fact


def test_a_forward_signature_mismatch_is_the_models_unless_the_data_path_calls_or_the_batch_is_empty():
    fact = _fact("A forward() that misses a required argument or rejects a keyword")
    assert "the forward signature is the model's" in fact and "the batch reaching the model is empty (data)" in fact


def test_a_device_lacking_what_the_run_asks_for_is_decided_by_who_asks_and_runtime_faults_by_any_accelerator():
    fact = _fact("A device that lacks a dtype or feature the run asks for")
    assert "config when a setting of the run asks for it" in fact and "model when the model's own code hard-codes" in fact
    assert "environment when the installed build lacks the device's support" in fact
    assert "HIP / ROCm, XLA / TPU, Habana, oneCCL, MPS" in _fact("An Ascend / CANN error code")


def test_one_definition_of_device_memory_ownership():
    """Device OOM is config (the settings decide device memory use) in the definitions, the deciding facts and
    every catalog case about memory; the host's memory and an impossible allocation by a library are environment."""
    from msmigrate.knowledge.catalog import load_catalog
    from msmigrate.knowledge.owners import DECIDING_FACTS, OWNER_SEMANTICS

    assert "device memory a run uses is the settings': config" in OWNER_SEMANTICS["environment"]
    assert any(f.startswith("Out of memory on the device: config") for f in DECIDING_FACTS)
    owners = {e.id: e.meta["owner"] for e in load_catalog().failures()}
    assert owners["device-oom"] == "config"
    assert owners["host-oom-killed"] == "environment" and owners["allocation-size-corrupt"] == "environment"

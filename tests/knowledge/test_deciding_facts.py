"""The facts that decide between two owners name an answer where the tuning half showed the LLM torn between two."""

from msmigrate.knowledge.owners import DECIDING_FACTS


def _fact(opening: str) -> str:
    (fact,) = [f for f in DECIDING_FACTS if f.startswith(opening)]
    return fact


def test_weights_that_do_not_fit_default_to_the_model_when_no_setting_is_shown():
    fact = _fact("Weights that do not fit the built model")
    assert "When the log shows no such setting, the module definition or its loading code is what must change: " \
           "model." in fact
    assert "a dimension exactly 1/N of the other" in fact  # what a parallel-size setting looks like in the shapes


def test_an_installed_librarys_class_lacking_an_option_is_config_not_model():
    fact = _fact("Parameters without gradients under DDP")
    assert "A class of an installed library" in fact and "is not code the migration changes: config" in fact


def test_an_unknown_model_type_points_at_the_checked_registry_fact():
    fact = _fact("A model type or architecture the libraries do not know")
    assert "checked facts say whether the installed transformers registers the type" in fact
    assert "'does not recognize this architecture' means no code was found" in fact

"""Id registries and plugin import (stand-in of the real contract; framework core)."""
import importlib
import pkgutil

from mindspeed.fsdp.utils.log import print_rank


def import_package(package_name, print_info=True):
    """Import one package; top-level entries (print_info=True) swallow ModuleNotFoundError, as the real one does."""
    package_name = package_name.replace("/", ".").strip(".")
    try:
        package = importlib.import_module(package_name)
    except ModuleNotFoundError as e:
        if not print_info:
            raise
        print_rank(print, f"Import failed: {package_name}. Error: {e}")
        return None, None
    if print_info:
        print_rank(print, f"Successfully imported: {package_name}")
    return package, package_name


def import_plugin(plugin_list=None):
    """Import every `training.plugin` entry and all non-package modules below it (registration side effects)."""
    for plugin_path in plugin_list or []:
        package, package_name = import_package(plugin_path, print_info=True)
        if not hasattr(package, "__path__"):
            continue
        # walk_packages imports sub-packages itself and silently skips those whose __init__ fails to import.
        for _, module_name, is_pkg in pkgutil.walk_packages(package.__path__, prefix=f"{package_name}."):
            if not is_pkg:
                import_package(module_name, print_info=False)


class Register:
    """A name -> object registry usable as `@reg.register("id")` or `reg.register("id")(obj)`."""

    def __init__(self):
        self._registry = {}

    def register(self, obj_id):
        def decorator(obj):
            if obj_id in self._registry:
                raise KeyError(f"ID '{obj_id}' is already registered to {self._registry[obj_id].__name__}.")
            self._registry[obj_id] = obj
            return obj
        return decorator

    def get(self, obj_id):
        if obj_id not in self._registry:
            raise KeyError(f"ID '{obj_id}' is not registered.")
        return self._registry[obj_id]


model_register = Register()
data_register = Register()

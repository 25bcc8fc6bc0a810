"""Hatch build hook: nrlprof's start-up hook goes to site-packages itself, in wheels and editable installs."""

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

STARTUP_FILES = {
    "packaging/nrlprof-startup.pth": "nrlprof-startup.pth",
    "packaging/nrlprof_startup.py": "nrlprof_startup.py",
}


class StartupHookFiles(BuildHookInterface):
    def initialize(self, version: str, build_data: dict) -> None:
        key = "force_include_editable" if version == "editable" else "force_include"
        build_data.setdefault(key, {}).update(STARTUP_FILES)

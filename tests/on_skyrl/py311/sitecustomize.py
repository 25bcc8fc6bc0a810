"""SkyRL 0.4.0 needs Python 3.12: on 3.11, pydantic refuses `typing.TypedDict` in its `skyrl.tinker.types`. Every
process of the tests' SkyRL jobs (driver, controller task, workers) has this folder on its path, so Python imports
this module at start-up: typing_extensions' TypedDict, which pydantic takes on 3.11, stands in for typing's."""

import typing

import typing_extensions

typing.TypedDict = typing_extensions.TypedDict

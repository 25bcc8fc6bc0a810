"""`@nrlprof.annotate` wraps a function with the function's own parameters (nrlprof.ranges.forwarding): every way
of calling it binds as the function itself binds, with the same default objects, and refuses what it refuses."""

from __future__ import annotations

import asyncio
import functools
import inspect

import pytest

import nrlprof
from nrlprof.process import state
from nrlprof.ranges import forwarding
from nrlprof.ranges.annotate import timings

SENTINEL = object()


@pytest.fixture(autouse=True)
def fresh_timings():
    state.timings.clear()
    yield
    state.timings.clear()


def every_shape(a, b=SENTINEL, /, c=2, *rest, d, e=[], **extra):  # noqa: B006 - the same object must pass on
    return a, b, c, rest, d, e, extra


CALLS = [
    ((1,), {"d": 4}),
    ((1, 2, 3, 5, 6), {"d": 4, "e": 7, "f": 8}),
    ((1,), {"c": 3, "d": 4, "zz": 9}),
]


@pytest.mark.parametrize(("args", "kwargs"), CALLS)
def test_every_parameter_shape_binds_as_the_function_does(args, kwargs):
    wrapped = nrlprof.annotate("shapes")(every_shape)
    assert wrapped(*args, **kwargs) == every_shape(*args, **kwargs)
    assert timings()["shapes"]["count"] == 1


def test_defaults_pass_on_as_the_same_objects():
    wrapped = nrlprof.annotate("shapes")(every_shape)
    _a, b, _c, _rest, _d, e, _extra = wrapped(1, d=0)
    assert b is SENTINEL
    assert e is every_shape.__kwdefaults__["e"]


def strict(a, /, b, *, c):
    return a, b, c


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [((), {"b": 1, "c": 1}), ((1, 2), {}), ((1,), {"a": 1, "b": 1, "c": 1}), ((1, 2, 3), {"c": 1}),
     ((1, 2), {"c": 1, "d": 1}), ((1,), {"b": 2, "c": 1, "zz": 0})],
)  # fmt: skip
def test_what_the_function_refuses_the_wrapper_refuses(args, kwargs):
    wrapped = nrlprof.annotate("strict")(strict)
    with pytest.raises(TypeError):
        strict(*args, **kwargs)
    with pytest.raises(TypeError):
        wrapped(*args, **kwargs)
    assert wrapped(1, b=2, c=3) == wrapped(1, 2, c=3) == (1, 2, 3)


def test_the_signature_and_metadata_are_the_functions():
    wrapped = nrlprof.annotate()(every_shape)
    assert inspect.signature(wrapped) == inspect.signature(every_shape)
    assert (wrapped.__name__, wrapped.__qualname__, wrapped.__wrapped__) == ("every_shape", "every_shape", every_shape)


def test_methods_and_generators_keep_their_meaning():
    class Policy:
        @nrlprof.annotate("policy/train")
        def train(self, batch, *, scale=1):
            return self, batch * scale

        @nrlprof.annotate("policy/stream")
        def stream(self, n):
            yield from range(n)

    policy = Policy()
    assert policy.train(3, scale=2) == (policy, 6)
    assert list(policy.stream(3)) == [0, 1, 2]
    assert timings()["policy/train"]["count"] == 1


def test_a_coroutine_is_awaited_inside_its_range():
    @nrlprof.annotate("rollout/async")
    async def generate(prompt, *, tokens=4):
        await asyncio.sleep(0)
        return prompt * tokens

    assert inspect.iscoroutinefunction(generate)
    assert asyncio.run(generate("a", tokens=2)) == "aa"
    assert timings()["rollout/async"]["count"] == 1


def test_parameters_named_like_the_wrappers_own_locals_get_the_generic_form():
    def clashing(_nrl_function, _nrl_began=5):
        return _nrl_function, _nrl_began

    def plain(x):
        return x

    assert forwarding._parameters(clashing) is None
    assert "*_nrl_args" not in forwarding._parameters(plain)[0]
    assert nrlprof.annotate("clash")(clashing)(1) == (1, 5)
    assert nrlprof.annotate("clash")(clashing)(_nrl_function=2, _nrl_began=3) == (2, 3)
    assert nrlprof.annotate("callable")(len)([1, 2]) == 2, "no code object: the generic form"


def test_other_callables_are_called_as_they_are():
    class Engine:
        def generate(self, prompt, tokens=2):
            return self, prompt * tokens

    engine = Engine()
    assert nrlprof.annotate("bound")(engine.generate)("a") == (engine, "aa"), "the bound method supplies self"
    assert nrlprof.annotate("partial")(functools.partial(strict, 1))(2, c=3) == (1, 2, 3)
    assert isinstance(nrlprof.annotate("class")(Engine)(), Engine)
    assert timings()["bound"]["count"] == 1

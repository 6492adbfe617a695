"""The results of the methods that are not a run's: watch and decide, a
fleet's submit and fetch, models.list and store.check
(docs/abi.md). The spec, the events and the outcome are in the generated
:mod:`io_harness.types`; these shapes are the methods' own, written here
like :func:`io_harness.version`'s."""

from __future__ import annotations

from typing import Dict, List, Literal, TypedDict

from . import types

#: What :meth:`Harness.decide` did: "decided" (recorded for the run's next
#: driver), "queued" (a fleet's run: queued for a worker), or "pending" for
#: a defer.
DecideState = Literal["decided", "queued", "pending"]


class Submitted(TypedDict):
    """The result of :meth:`Harness.submit`: the run's id, queued."""

    run_id: str
    state: Literal["queued"]


class Fetched(TypedDict):
    """The result of :meth:`Harness.fetch`: the directory (absolute) and
    how many files were written into it."""

    dir: str
    files: int


class _ModelRequired(TypedDict):
    vendor: str
    id: str
    tools: bool
    images: bool


class Model(_ModelRequired, total=False):
    """One entry of the model catalogue. A field left out is unknown."""

    aliases: List[str]
    context_window: int
    max_output_tokens: int
    price: types.Price
    note: str


class ModelList(TypedDict):
    """The result of :func:`io_harness.models_list`: the catalogue as a run
    sees it, sorted by vendor and id."""

    as_of: str
    sources: List[str]
    #: The override file merged in, or "".
    override: str
    models: List[Model]


class StoreReport(TypedDict):
    """What :func:`io_harness.store_check` found in a store file."""

    path: str
    #: The store's files (database, -wal, -shm) and their sizes in bytes.
    files: Dict[str, int]
    schema: int
    #: SQLite's integrity check: ["ok"], or the problems found.
    integrity: List[str]
    #: The runs by status.
    runs: Dict[str, int]
    #: How many runs a driver holds now.
    leased: int


class StoreCheck(TypedDict):
    """The result of :func:`io_harness.store_check`."""

    ok: bool
    #: The report as text, as ``io-harness store check`` prints it.
    text: str
    report: StoreReport

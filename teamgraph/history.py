"""An agent's history as the Team's saver loads it: messages decoded when first read.

NOTE: a resumed thread used to decode every message of every agent's history on each
load (``get_state``, then the run's own), though a step reads one agent's history and
the log only its tail: at 5 000 messages that was most of a resume. The Team's saver
(``teamgraph/checkpoints/serde.py``) stores each step's appended messages as one
encoded batch per agent and loads it back undecoded; a :class:`History` is the
sequence of those batches, and decodes a batch the first time one of its messages is
read. On disk nothing changes but the write's type tag: the messages are the ones
LangGraph's serializer writes. Any other checkpointer gives plain lists.
"""

from __future__ import annotations

import operator
import threading
from bisect import bisect_right
from collections.abc import Iterable, Iterator, Sequence
from itertools import accumulate
from typing import Any, Protocol, cast, overload

from langchain_core.messages import AnyMessage

__all__ = ["EncodedMessages", "Histories", "History", "HistoryAppend", "join_history"]


class Histories(dict[str, Sequence[AnyMessage]]):
    """The ``histories`` channel's value: each agent's history, by display name.

    NOTE: a plain dict to every checkpointer. The Team's serializer stores a DeltaChannel
    snapshot of one as batches; it tells the team's histories by this type, never by
    their shape (a user's channel of message lists stays lists).
    """


class HistoryAppend(dict[str, list[AnyMessage]]):
    """A write to ``histories``: per agent, the messages its history gains.

    NOTE: a plain dict to every checkpointer; the Team's serializer recognises it and
    stores each agent's messages as one batch that a later load decodes on demand.
    """


class MessageDecoder(Protocol):
    def decode_messages(self, blob: bytes) -> list[AnyMessage]: ...


_DECODING = threading.Lock()


class EncodedMessages:
    """A batch of messages as the checkpoint stores them, decoded the first time it is read.

    Args:
        count: How many messages the batch holds (known without decoding it).
        data: The batch as the serializer encoded it.
        decoder: The serializer that encoded ``data`` (its allowlist decides what loads).
    """

    __slots__ = ("_data", "_decoder", "_messages", "count")

    def __init__(self, count: int, data: bytes, decoder: MessageDecoder) -> None:
        self.count = count
        self._data = data
        self._decoder = decoder
        self._messages: list[AnyMessage] | None = None

    @property
    def decoded(self) -> bool:
        return self._messages is not None

    @property
    def encoded(self) -> bytes | None:
        """The stored bytes, while the batch is not decoded (a snapshot stores them as they are)."""
        with _DECODING:
            return None if self._messages is not None else self._data

    def messages(self) -> list[AnyMessage]:
        """The batch's messages (decoded once; the same list afterwards, never changed)."""
        messages = self._messages
        if messages is not None:
            return messages
        # NOTE: a step in the pool and the router (its log, think ahead) may read the same
        # loaded batch at once: one decodes it, the other then reads what it decoded.
        with _DECODING:
            if self._messages is None:
                messages = self._decoder.decode_messages(self._data)
                if not isinstance(messages, list) or len(messages) != self.count:
                    raise ValueError(f"a stored history batch should hold {self.count} messages: {messages!r:.80}")
                self._messages, self._data = messages, b""
            return self._messages


Part = list[AnyMessage] | EncodedMessages


def _count(part: Part) -> int:
    return part.count if isinstance(part, EncodedMessages) else len(part)


def _messages(part: Part) -> list[AnyMessage]:
    return part.messages() if isinstance(part, EncodedMessages) else part


class History(Sequence[AnyMessage]):
    """One agent's messages, oldest first; batches stored encoded are decoded when read.

    A read-only sequence: ``len`` needs no decoding, an index or a slice decodes only the
    batches it touches, iteration decodes batch by batch. It compares equal to a list of
    the same messages; ``+``, ``copy`` and ``pickle`` give plain lists.
    """

    __slots__ = ("_ends", "_parts")

    def __init__(self, parts: Iterable[Part] = ()) -> None:
        self._parts: tuple[Part, ...] = tuple(p for p in parts if _count(p))
        self._ends: list[int] = list(accumulate(_count(p) for p in self._parts))

    def extended(self, parts: Sequence[Part]) -> History:
        """This history followed by ``parts``, sharing this one's parts (no pass over them)."""
        more = History(parts)
        if not more._parts:
            return self
        joined = History()
        joined._parts = self._parts + more._parts
        joined._ends = self._ends + [len(self) + end for end in more._ends]
        return joined

    @property
    def decoded(self) -> bool:
        """Whether every message is decoded already (tests and benchmarks read it)."""
        return all(not isinstance(p, EncodedMessages) or p.decoded for p in self._parts)

    def parts(self) -> tuple[Part, ...]:
        return self._parts

    def __len__(self) -> int:
        return self._ends[-1] if self._ends else 0

    @overload
    def __getitem__(self, index: int) -> AnyMessage: ...

    @overload
    def __getitem__(self, index: slice) -> list[AnyMessage]: ...

    def __getitem__(self, index: int | slice) -> AnyMessage | list[AnyMessage]:
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            if step != 1:
                return list(self)[index]
            return self._range(start, stop)
        i = operator.index(index)
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError("history index out of range")
        k = bisect_right(self._ends, i)
        return _messages(self._parts[k])[i - (self._ends[k - 1] if k else 0)]

    def _range(self, start: int, stop: int) -> list[AnyMessage]:
        out: list[AnyMessage] = []
        k = bisect_right(self._ends, start)
        while start < stop and k < len(self._parts):
            offset = self._ends[k - 1] if k else 0
            part = _messages(self._parts[k])
            out.extend(part[start - offset : stop - offset])
            start, k = self._ends[k], k + 1
        return out

    def __iter__(self) -> Iterator[AnyMessage]:
        for part in self._parts:
            yield from _messages(part)

    def __reversed__(self) -> Iterator[AnyMessage]:
        for part in reversed(self._parts):
            yield from reversed(_messages(part))

    def __eq__(self, other: object) -> bool:
        if other is self:
            return True
        if not isinstance(other, (History, list, tuple)) or len(other) != len(self):
            return False
        if isinstance(other, History) and other._parts == self._parts:
            return True  # NOTE: the same batches (a step's reads against those a call was prepared on)
        return all(a is b or a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]

    def __add__(self, other: Iterable[AnyMessage]) -> list[AnyMessage]:
        return [*self, *other]

    def __radd__(self, other: Iterable[AnyMessage]) -> list[AnyMessage]:
        return [*other, *self]

    def __repr__(self) -> str:
        return f"History({list(self)!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        # NOTE: copies and pickles are plain lists: the undecoded batches refer to a serializer.
        return (list, (list(self),))


def join_history(
    old: Sequence[AnyMessage] | None, batches: Sequence[Sequence[AnyMessage] | EncodedMessages]
) -> Sequence[AnyMessage]:
    """``old`` followed by each batch, without decoding anything.

    A plain list when nothing is stored encoded (every checkpointer but the Team's
    saver), else a :class:`History` that keeps the stored batches encoded.
    """
    if not isinstance(old, History) and not any(isinstance(b, (History, EncodedMessages)) for b in batches):
        return [*(old or ()), *(m for batch in batches for m in cast(Sequence[AnyMessage], batch))]
    parts: list[Part] = []
    for seq in batches:
        if isinstance(seq, History):
            parts.extend(seq.parts())
        elif isinstance(seq, EncodedMessages):
            parts.append(seq)
        elif seq:
            parts.append(list(seq))
    # NOTE: a resumed run appends to a History at every step: its parts are shared, not walked.
    return (old if isinstance(old, History) else History([list(old or ())])).extended(parts)

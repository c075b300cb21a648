"""A bounded least-recently-used memo, shared by the server (verdict cache) and the workers
(parsed golds, verify results)."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

__all__ = ["LRU"]


class LRU(OrderedDict[Any, Any]):
    """A bounded memo: ``get`` refreshes an entry, ``put`` evicts the oldest past ``size``."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self.size = size

    def get(self, key: Any, default: Any = None) -> Any:
        hit = super().get(key, default)
        if hit is not default:
            self.move_to_end(key)
        return hit

    def put(self, key: Any, value: Any) -> None:
        self[key] = value
        if len(self) > self.size:
            self.popitem(last=False)

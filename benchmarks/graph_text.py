"""Deterministic text and times for the generated benchmark graphs (make_large_graph, graph_plants, make_jsonl).

Texts mix English and Chinese words from a fixed, skewed vocabulary, so `cache` and `方案` are very common: a
deliberate worst case for search.
"""

from __future__ import annotations

import random
import time
from typing import Final


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


# A skewed vocabulary: earlier words are drawn more often.
ENGLISH: Final = _words(
    """
    cache decision session plan review schedule latency index sync migration rollback deploy token queue retry budget
    owner storage design test release metric alert client server api schema backup replica shard timeout quota
    cluster worker batch stream export import audit policy
    """
)
CHINESE: Final = _words(
    """
    方案 会话缓存 回顾调度 决定 讨论 上线 回滚 测试 性能 索引 同步 迁移
    数据库 接口 用户 配置 监控 告警 预算 风险 容量 延迟 发布 评审
    """
)
VOCABULARY: Final = tuple(w for pair in zip(ENGLISH, CHINESE, strict=False) for w in pair) + tuple(
    ENGLISH[len(CHINESE) :]
)
WEIGHTS: Final = tuple(1.0 / (rank + 3) for rank in range(len(VOCABULARY)))
EVENT_TYPES: Final = ("decision", "discussion", "change", "milestone", "issue", "verification")
CHANGE_TYPES: Final = ("proposed", "added", "verified", "revised", "contrasts", "removed")
RELATION_TYPES: Final = ("supports", "depends-on", "contrasts", "related", "revised", "replaces")
ENTITY_TYPES: Final = ("concept", "decision", "option", "preference", "issue", "task")
CONFIRMATION: Final = ("automatic", "automatic", "automatic", "confirmed", "user-edited")

EPOCH_START: Final = 1_704_067_200  # 2024-01-01T00:00:00Z
EPOCH_SPAN: Final = 2 * 365 * 86_400


def iso(seconds: int) -> str:
    """UTC text as the store keeps it: 'YYYY-MM-DDTHH:MM:SS.000Z'."""
    return time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(seconds))


class Text:
    """Deterministic mixed-language text from the skewed vocabulary."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def words(self, low: int, high: int) -> str:
        count = self.rng.randint(low, high)
        picked = self.rng.choices(VOCABULARY, weights=WEIGHTS, k=count)
        out: list[str] = []
        for word in picked:
            # Chinese words after Chinese words are sometimes written without a space.
            if out and not word.isascii() and not out[-1][-1].isascii() and self.rng.random() < 0.5:
                out[-1] += word
            else:
                out.append(word)
        return " ".join(out)

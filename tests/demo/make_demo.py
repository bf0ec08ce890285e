"""Build the bundled demo graph: `python tests/demo/make_demo.py` rewrites `server/demo/demo_graph.jsonl`.

The demo follows a small bilingual team. Project Atlas (a sync service running on edge boxes)
chose Redis as its session cache (会话缓存) in March, revised that choice in May with explicit
evidence (ops cannot run Redis on the edge boxes) and decided on SQLite in WAL mode; in June
someone floated LMDB as an option, with no replacement evidence, while the migration task is
still in progress. Around it: a mobile app project (Beacon), a joint release of the two, a
Global engineering-practice scope and an inactive legacy project. The session-cache work is
also a feature story with two threads, and the lesson "don't pick infrastructure ops cannot run
on the edge boxes" an experience of the project pair (demo/stories.py). docs/demo.md tells the
story and lists the ids to try.

Everything is written out literally except the long design document, which is generated from
numbered, varied sections so that every page of it differs. Fragment ranges are computed here
by finding the saved fragment in the referenced source version, so they are always exact.

The generator lives beside the tests, not in the installed package: the package ships only its
output, and tests/test_demo_graph.py checks that the shipped file is exactly what this writes.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import orjson

if not __package__:
    # Run as a file: put the repository root (for `server`) and tests/ (for `demo`) on the path.
    sys.path[:0] = [str(Path(__file__).resolve().parents[2]), str(Path(__file__).resolve().parents[1])]

from demo.base import ATLAS, BEACON, GLOBAL, LEGACY, PAIR, RECORDED, Demo, Line, event, message, ref, when
from demo.stories import stories_and_experiences
from server.contracts.interchange import KIND_ORDER, LINE

OUT = Path(__file__).resolve().parents[2] / "server" / "demo" / "demo_graph.jsonl"


def long_design_doc() -> str:
    """About 60,000 code points of numbered design notes mixing English, Chinese, emoji and CJK Ext. B."""
    topics = [
        ("Session lifecycle", "会话生命周期"),
        ("Write-ahead logging", "预写日志"),
        ("Eviction and TTL", "淘汰与过期"),
        ("Edge box hardware", "边缘节点硬件"),
        ("Backup and restore", "备份与恢复"),
        ("Observability", "可观测性"),
        ("Failure modes", "故障模式"),
        ("Security of tokens", "令牌安全"),
        ("Schema evolution", "结构演进"),
        ("Load testing", "压力测试"),
        ("Cloud region parity", "云端一致性"),
    ]
    english = [
        "Section {n} looks at {topic} for the Atlas session cache on the edge boxes, round {r} of the review.",
        "Measured on box model E{m}: {w} session writes per second, p99 read latency {l} ms, no errors.",
        "Open question {n}.{r}: what happens to {topic_lower} when the SD card is {p}% full?",
        "We keep this paragraph short on purpose; it only records what was observed in run {n}.",
        "Compared with the previous section, the numbers moved by {d} percent, within noise.",
    ]
    chinese = [
        "第 {n} 节讨论{topic_zh}：边缘节点上的会话数据必须在断电后可恢复。",
        "结论暂定，第 {r} 轮评审再确认；现场反馈记在附录 {m}。",
        "注意：{topic_zh}的参数不要在生产环境随意修改，先在预发环境验证。",
        "测量结果：每秒写入 {w} 次，读取 p99 为 {l} 毫秒。",
    ]
    emoji = ["😀", "🚀", "🧪", "📦", "🔒", "🧭", "🐢", "🛠"]
    rare = ["𠀀", "𠀁", "𠀂", "𪚥", "𡃁", "𤭢"]
    sections: list[str] = ["Atlas session storage design notes · 会话存储设计笔记 📝\n\n"]
    for n in range(1, 161):
        topic, topic_zh = topics[n % len(topics)]
        values = {
            "n": n,
            "r": n % 4 + 1,
            "m": n % 3 + 1,
            "w": 1200 + 37 * n,
            "l": f"{1.5 + (n % 9) / 10:.1f}",
            "p": 50 + n % 45,
            "d": n % 7,
            "topic": topic,
            "topic_lower": topic.lower(),
            "topic_zh": topic_zh,
        }
        sentences = [
            english[n % len(english)],
            chinese[n % len(chinese)],
            english[(n + 2) % len(english)],
            chinese[(n + 1) % len(chinese)],
            english[(n + 4) % len(english)],
        ]
        body = " ".join(sentence.format(**values) for sentence in sentences)
        first, second, third = emoji[n % len(emoji)], emoji[(n * 3) % len(emoji)], emoji[(n + 5) % len(emoji)]
        marks = f"{first}{second} {rare[n % len(rare)]}字 {third}"
        sections.append(f"§{n}. {topic} / {topic_zh}\n{body} {marks}\n\n")
    text = "".join(sections)
    assert len(text) > 55_000, len(text)
    return text


def projects_and_scopes(d: Demo) -> None:
    d.add("project", id="atlas", name="Atlas sync service", status="active")
    d.add("project", id="beacon", name="Beacon mobile app", status="active")
    d.add("project", id="legacy", name="Legacy importer", status="inactive")
    for scope in (ATLAS, BEACON, PAIR, GLOBAL, LEGACY):
        d.add("scope", scope=scope)
    d.add(
        "story_line",
        id="sl-atlas-cache",
        scope=ATLAS,
        topic="Session cache for the Atlas edge boxes / 会话缓存方案",
        recorded_at=RECORDED["res-atlas-2026-03"],
        revision="sl-atlas-cache@3",
    )
    d.add(
        "story_line",
        id="sl-beacon-sync",
        scope=BEACON,
        topic="Beacon offline sync / 离线同步",
        recorded_at=RECORDED["res-beacon-2026-06"],
    )
    d.add(
        "story_line",
        id="sl-pair-release",
        scope=PAIR,
        topic="Joint release 2026.7 of Atlas and Beacon / 联合发布",
        recorded_at=RECORDED["res-pair-2026-06"],
        revision="sl-pair-release@1",
    )
    d.add(
        "story_line",
        id="sl-global-practices",
        scope=GLOBAL,
        topic="Engineering practices across teams / 跨团队工程实践",
        recorded_at=RECORDED["res-global-2026-07"],
        revision="sl-global-practices@1",
    )
    d.add(
        "story_line",
        id="sl-legacy-import",
        scope=LEGACY,
        topic="Retiring the CSV importer / CSV 导入器下线",
        recorded_at=RECORDED["res-legacy-2025-11"],
    )


def atlas_sources(d: Demo) -> None:
    cache = "conv-atlas-cache"
    d.source(
        "src-msg-decision-a",
        "conversation",
        project_id="atlas",
        conversation_id=cache,
        title="#atlas-cache · Mei Lin · 2026-03-10 11:20",
        updated_at="2026-03-10T11:20:00+08:00",
        versions=[
            (
                "v1",
                "2026-03-10T11:20:00+08:00",
                "Decision for the session cache (会话缓存): we go with Redis, one instance per region, sessions as "
                "hashes keyed by session id. TTL 30 minutes for now — 先按 30 分钟，之后再看。 "
                "Tom will add Redis to the provisioning scripts.",
            )
        ],
    )
    d.source(
        "src-msg-redis-cluster-joke",
        "conversation",
        project_id="atlas",
        conversation_id=cache,
        title="#atlas-cache · Wang Hao · 2026-03-12 18:40",
        updated_at="2026-03-12T18:40:00+08:00",
        versions=[
            (
                "v1",
                "2026-03-12T18:40:00+08:00",
                "haha at this rate we'll need a Redis Cluster with 3 nodes per edge box 😂 (kidding, 开玩笑的)",
            )
        ],
    )
    d.source(
        "src-old-standup",
        "note",
        project_id="atlas",
        title="Standup notes, January (imported from the old wiki)",
        updated_at="2026-01-30T09:00:00+08:00",
        versions=[
            (
                "v1",
                "2026-01-30T09:00:00+08:00",
                "Standup notes, January.\n"
                "- Cache invalidation bug on logout reported by QA; sessions survived logout on one node.\n"
                "- 退出登录后会话未失效，QA 已提单。\n"
                "- Wang Hao to look into it.",
            )
        ],
    )
    d.source(
        "src-long-design-doc",
        "note",
        project_id="atlas",
        title="Atlas session storage design notes (long)",
        updated_at="2026-03-05T16:00:00+08:00",
        versions=[("v1", "2026-03-05T16:00:00+08:00", long_design_doc())],
    )
    d.source(
        "src-msg-ttl-2h",
        "conversation",
        project_id="atlas",
        conversation_id=cache,
        title="#atlas-cache · Chen Jing · 2026-04-22 14:05",
        updated_at="2026-04-22T14:05:00+08:00",
        versions=[
            (
                "v1",
                "2026-04-22T14:05:00+08:00",
                "From the field pilot: technicians stay logged in for a whole shift, so sessions on edge boxes should "
                "live 2 hours, not 30 minutes. 现场反馈：会话有效期应为 2 小时。",
            )
        ],
    )
    d.source(
        "src-changed-msg",
        "conversation",
        project_id="atlas",
        conversation_id=cache,
        title="#atlas-cache · Tom Becker · 2026-04-28 18:12 (edited)",
        updated_at="2026-05-06T09:30:00+08:00",
        versions=[
            (
                "v1",
                "2026-04-28T18:12:00+08:00",
                "Edge box specs for the cache discussion: 512 MB RAM, one SD card, no on-call rotation at the sites. "
                "Running Redis there is not realistic.",
            ),
            (
                "v2",
                "2026-05-06T09:30:00+08:00",
                "Edge box specs for the cache discussion: 1 GB RAM (the 512 MB figure was the old model), one SD card, "
                "no on-call rotation at the sites. Running Redis there is still not realistic.",
            ),
        ],
    )
    # Deleted by its author: no version is kept, only the fragment saved by the May review.
    d.source(
        "src-deleted-msg",
        "conversation",
        project_id="atlas",
        conversation_id=cache,
        title="#atlas-cache · Wang Hao (deleted message)",
        status="deleted",
        updated_at="2026-06-03T12:00:00+08:00",
        versions=[],
    )
    d.source(
        "src-msg-revision",
        "conversation",
        project_id="atlas",
        conversation_id=cache,
        title="#atlas-cache · Mei Lin · 2026-05-02 09:17",
        updated_at="2026-05-02T09:17:00+08:00",
        versions=[
            (
                "v1",
                "2026-05-02T09:17:00+08:00",
                "🙏 Update on the session cache (会话缓存): we are revising the March decision to use Redis.\n"
                "Ops confirmed they cannot run Redis on the edge boxes: no on-call at the sites, 512 MB RAM, one SD "
                "card. 运维确认边缘节点无法运维 Redis。\n"
                "New plan: replace Redis with SQLite in WAL mode, one database file per box. "
                "会话缓存改用 SQLite（WAL 模式）。 This replaces Decision A for all new deployments; the cloud Redis "
                "stays until the migration task is done.",
            )
        ],
    )
    d.source(
        "src-msg-decision-b",
        "conversation",
        project_id="atlas",
        conversation_id=cache,
        title="#atlas-cache · Mei Lin · 2026-05-03 15:00",
        updated_at="2026-05-03T15:00:00+08:00",
        versions=[
            (
                "v1",
                "2026-05-03T15:00:00+08:00",
                "Confirmed in today's architecture sync: session cache = SQLite in WAL mode. 决定了，按这个方案走。 "
                "Migration is tracked as ATL-212.",
            )
        ],
    )
    d.source(
        "src-msg-load-test",
        "conversation",
        project_id="atlas",
        conversation_id="conv-atlas-ops",
        title="#atlas-ops · assistant summary · 2026-04-15",
        updated_at="2026-04-15T09:00:00Z",
        versions=[
            (
                "v1",
                "2026-04-15T09:00:00Z",
                "Load test summary (window 2026-04-01 → 2026-04-14): SQLite WAL handled 1,800 session writes/s on the "
                "reference edge box with p99 read latency 2.1 ms. 压测窗口 4 月 1 日至 4 月 14 日。 "
                "The first draft said 'first week of April'; the window was corrected to two weeks.",
            )
        ],
    )
    # Written in an Atlas conversation, later moved to Beacon: its current location is Beacon.
    d.source(
        "src-moved-msg",
        "conversation",
        project_id="beacon",
        conversation_id="conv-client-retry",
        title="Client retry policy · Priya Nair · 2026-04-20 16:00 (moved to Beacon)",
        updated_at="2026-06-02T10:00:00+08:00",
        versions=[
            (
                "v1",
                "2026-04-20T16:00:00+08:00",
                "Client retry policy against the Atlas sync API: exponential backoff starting at 500 ms, max 5 "
                "retries, then park the mutation in the offline queue. 重试策略：指数退避，最多 5 次。",
            )
        ],
    )
    d.source(
        "src-msg-option-c",
        "conversation",
        project_id="atlas",
        conversation_id=cache,
        title="#atlas-cache · Wang Hao · 2026-06-20 16:45",
        updated_at="2026-06-20T16:45:00+08:00",
        versions=[
            (
                "v1",
                "2026-06-20T16:45:00+08:00",
                "Has anyone looked at LMDB for the session cache? LMDB could be faster than SQLite WAL for our "
                "read-heavy lookups. Not proposing we switch — just an option to benchmark later. "
                "只是备选，先不改方案。",
            )
        ],
    )
    d.source(
        "src-task-cache-migration",
        "task",
        project_id="atlas",
        title="ATL-212 Migrate session cache to SQLite WAL",
        updated_at="2026-07-10T11:00:00+08:00",
        versions=[
            (
                "2026-07-10",
                "2026-07-10T11:00:00+08:00",
                "ATL-212 · Migrate session cache to SQLite WAL / 会话缓存迁移到 SQLite\n"
                "Status: In progress (进行中)\n"
                "Assignee: Wang Hao\n"
                "Done: schema and WAL settings merged; edge image build updated.\n"
                "Todo: move cloud sessions off Redis; remove Redis from provisioning; nightly backup of the db file.",
            )
        ],
    )
    d.source(
        "src-kickoff-notes",
        "note",
        project_id="atlas",
        title="Atlas kickoff notes, 2026-02-01 (uploaded in July)",
        updated_at="2026-07-14T17:20:00+08:00",
        versions=[
            (
                "v1",
                "2026-07-14T17:20:00+08:00",
                "Atlas kickoff — 2026-02-01\n"
                "Attendees: Mei Lin, Tom Becker, Wang Hao, Chen Jing\n"
                "Risks: session cache technology not chosen yet (会话缓存方案未定); edge boxes are small.\n"
                "Next: pick a cache by mid-March.",
            )
        ],
    )


def other_sources(d: Demo) -> None:
    d.source(
        "src-beacon-msg",
        "conversation",
        project_id="beacon",
        conversation_id="conv-beacon-sync",
        title="#beacon-sync · Priya Nair · 2026-06-05 10:30",
        updated_at="2026-06-05T10:30:00+08:00",
        versions=[
            (
                "v1",
                "2026-06-05T10:30:00+08:00",
                "Offline-first: the app queues every mutation in a local SQLite table and replays it when the sync "
                "API is reachable. 离线优先：所有修改先写本地队列，联网后重放。",
            )
        ],
    )
    d.source(
        "src-beacon-session-msg",
        "conversation",
        project_id="beacon",
        conversation_id="conv-beacon-sync",
        title="#beacon-sync · Liu Yang · 2026-06-12 11:00",
        updated_at="2026-06-12T11:00:00+08:00",
        versions=[
            (
                "v1",
                "2026-06-12T11:00:00+08:00",
                "On the phone the session cache is just the auth token in the iOS Keychain / Android Keystore; "
                "手机端的会话缓存只保存令牌。 No server-side session state for Beacon.",
            )
        ],
    )
    d.source(
        "src-pair-msg",
        "conversation",
        project_id="atlas",
        conversation_id="conv-release-2026-7",
        title="#release-2026-7 · Chen Jing · 2026-06-15 18:00",
        updated_at="2026-06-15T18:00:00+08:00",
        versions=[
            (
                "v1",
                "2026-06-15T18:00:00+08:00",
                "Release 2026.7: Atlas freezes sync API v3 today; Beacon 4.2 builds against it. "
                "今天冻结 v3 接口，Beacon 4.2 基于它开发。 Go/no-go on June 28.",
            )
        ],
    )
    d.source(
        "src-pair-gonogo-msg",
        "conversation",
        project_id="beacon",
        conversation_id="conv-release-2026-7",
        title="#release-2026-7 · Priya Nair · 2026-06-28 17:30",
        updated_at="2026-06-28T17:30:00+08:00",
        versions=[
            (
                "v1",
                "2026-06-28T17:30:00+08:00",
                "Go/no-go: GO for 2026.7. Beacon 4.2 waits for one crash fix, Atlas ships on July 8. 可以发布。",
            )
        ],
    )
    d.source(
        "src-global-note",
        "note",
        title="Engineering handbook · Decisions",
        updated_at="2026-07-01T09:00:00Z",
        versions=[
            (
                "v1",
                "2026-07-01T09:00:00Z",
                "Engineering handbook · Decisions\n"
                "Record every architecture decision as a short ADR: context, decision, consequences. "
                "When a decision changes, write a new ADR that names the old one and says why — never edit the old "
                "one in place. 决策变更要新写一条 ADR，说明原因，不要改旧的。",
            )
        ],
    )


def results(d: Demo) -> None:
    d.add(
        "result",
        id="res-atlas-2026-03",
        scope=ATLAS,
        review_generated_at="2026-03-31T18:00:00+08:00",
        recorded_at=RECORDED["res-atlas-2026-03"],
        revision="atlas-2026-03.1",
        coverage={
            "kind": "detailed",
            "processed_range": {"from": "2026-03-01T00:00:00+08:00", "to": "2026-03-31T23:59:59+08:00"},
            "sources": [
                {"source_id": s, "source_version": "v1", "fragments": [d.whole(s, "v1")], "status": "processed"}
                for s in ("src-msg-decision-a", "src-msg-redis-cluster-joke", "src-old-standup", "src-long-design-doc")
            ],
            "missing": [],
            "unprocessed_sources": 0,
            "source_types_included": ["conversation", "note"],
            "source_types_not_included": ["task", "knowledge", "memory"],
        },
    )
    doc_length = len(d.texts[("src-long-design-doc", "v1")])
    d.add(
        "result",
        id="res-atlas-2026-05",
        scope=ATLAS,
        review_generated_at="2026-05-31T20:00:00+08:00",
        recorded_at=RECORDED["res-atlas-2026-05"],
        revision="atlas-2026-05.1",
        coverage={
            "kind": "detailed",
            "processed_range": {"from": "2026-04-01T00:00:00+08:00", "to": "2026-05-31T23:59:59+08:00"},
            "sources": [
                *(
                    {"source_id": s, "source_version": "v1", "fragments": [d.whole(s, "v1")], "status": "processed"}
                    for s in (
                        "src-msg-ttl-2h",
                        "src-changed-msg",
                        "src-msg-revision",
                        "src-msg-decision-b",
                        "src-msg-load-test",
                        "src-moved-msg",
                    )
                ),
                # Deleted since; this run still read its version v1.
                {
                    "source_id": "src-deleted-msg",
                    "source_version": "v1",
                    "fragments": [[0, len(DELETED_MSG_V1)]],
                    "status": "processed",
                },
                {
                    "source_id": "src-long-design-doc",
                    "source_version": "v1",
                    "fragments": [[0, 30_000]],
                    "status": "partial",
                },
            ],
            "missing": [
                {
                    "source_id": "src-long-design-doc",
                    "ranges": [[30_000, doc_length]],
                    "reason": "Leaf batch 3 failed (model timeout) and was not retried. 第 3 批超时，未重试。",
                }
            ],
            "unprocessed_sources": 2,
            "source_types_included": ["conversation", "note"],
            "source_types_not_included": ["knowledge"],
        },
    )
    d.add(
        "result",
        id="res-atlas-2026-07",
        scope=ATLAS,
        review_generated_at="2026-07-15T10:00:00Z",
        recorded_at=RECORDED["res-atlas-2026-07"],
        revision=None,
        coverage={"kind": "legacy_count", "count": 14},
    )
    d.add(
        "result",
        id="res-beacon-2026-06",
        scope=BEACON,
        review_generated_at="2026-06-30T09:00:00+08:00",
        recorded_at=RECORDED["res-beacon-2026-06"],
        revision="beacon-2026-06.1",
        coverage=None,
    )
    d.add(
        "result",
        id="res-pair-2026-06",
        scope=PAIR,
        review_generated_at="2026-07-01T08:00:00+08:00",
        recorded_at=RECORDED["res-pair-2026-06"],
        revision="pair-2026-06.1",
        coverage={
            "kind": "detailed",
            "processed_range": {"from": "2026-06-01T00:00:00+08:00", "to": "2026-06-30T23:59:59+08:00"},
            "sources": [
                {"source_id": s, "source_version": "v1", "fragments": [d.whole(s, "v1")], "status": "processed"}
                for s in ("src-pair-msg", "src-pair-gonogo-msg")
            ],
            "missing": [],
            "unprocessed_sources": 0,
            "source_types_included": ["conversation"],
            "source_types_not_included": ["task", "note"],
        },
    )
    # A detailed record that did not note unprocessed sources or excluded types: those stay unknown.
    d.add(
        "result",
        id="res-global-2026-07",
        scope=GLOBAL,
        review_generated_at="2026-08-01T08:00:00Z",
        recorded_at=RECORDED["res-global-2026-07"],
        revision="global-2026-07.1",
        coverage={
            "kind": "detailed",
            "processed_range": {"from": "2026-07-01T00:00:00Z", "to": "2026-07-31T23:59:59Z"},
            "sources": [
                {
                    "source_id": "src-global-note",
                    "source_version": "v1",
                    "fragments": [d.whole("src-global-note", "v1")],
                    "status": "processed",
                }
            ],
            "missing": [],
            "unprocessed_sources": None,
            "source_types_included": ["note"],
            "source_types_not_included": None,
        },
    )
    d.add(
        "result",
        id="res-legacy-2025-11",
        scope=LEGACY,
        review_generated_at="2025-11-30T16:58:00+08:00",
        recorded_at=RECORDED["res-legacy-2025-11"],
        coverage={"kind": "legacy_count", "count": 3},
    )


DELETED_MSG_V1 = (
    "FYI staging Redis ran out of memory again last night, sessions got evicted and everyone was logged out. "
    "预发环境 Redis 内存又满了。"
)


def references(d: Demo) -> None:
    cache = "conv-atlas-cache"
    # res-atlas-2026-03
    d.reference(
        "ref-decision-a-msg",
        "res-atlas-2026-03",
        "src-msg-decision-a",
        "v1",
        "Decision for the session cache (会话缓存): we go with Redis, one instance per region, sessions as hashes "
        "keyed by session id.",
        locator=message("atlas", cache, "msg-cache-0012", 12),
        title="#atlas-cache · Mei Lin · 2026-03-10 11:20",
        source_record_time="2026-03-10T11:20:00+08:00",
    )
    d.reference(
        "ref-ttl-30m",
        "res-atlas-2026-03",
        "src-msg-decision-a",
        "v1",
        "TTL 30 minutes for now — 先按 30 分钟，之后再看。",
        locator=message("atlas", cache, "msg-cache-0012", 12),
        title="#atlas-cache · Mei Lin · 2026-03-10 11:20",
        source_record_time="2026-03-10T11:20:00+08:00",
    )
    d.reference(
        "ref-redis-cluster-joke",
        "res-atlas-2026-03",
        "src-msg-redis-cluster-joke",
        "v1",
        "we'll need a Redis Cluster with 3 nodes per edge box 😂",
        locator=message("atlas", cache, "msg-cache-0014", 14),
        title="#atlas-cache · Wang Hao · 2026-03-12 18:40",
        source_record_time="2026-03-12T18:40:00+08:00",
    )
    # Longer than one page of read_source (8,000 code points at most), so the snapshot pages too.
    design = d.texts[("src-long-design-doc", "v1")]
    d.reference(
        "ref-long-doc",
        "res-atlas-2026-03",
        "src-long-design-doc",
        "v1",
        design[design.index("§40. ") : design.index("§63. ")],
        source_type="note",
        locator={"project_id": "atlas", "document_id": "doc-atlas-session-design", "chunk_id": "full-text"},
        title="Atlas session storage design notes (long) · §40–§62",
        source_record_time="2026-03-05T16:00:00+08:00",
    )
    # An old reference written before locators existed: nothing about its position is known.
    d.add(
        "source_reference",
        id="ref-no-locator",
        result_id="res-atlas-2026-03",
        source_type="note",
        original_source_id="src-old-standup",
        source_version=None,
        locator=None,
        title="Standup notes, January",
        fragment={
            "text": "Cache invalidation bug on logout reported by QA; sessions survived logout on one node.",
            "start": None,
            "end": None,
        },
        source_length=None,
        recorded_at=RECORDED["res-atlas-2026-03"],
    )
    # res-atlas-2026-05
    d.reference(
        "ref-ttl-2h",
        "res-atlas-2026-05",
        "src-msg-ttl-2h",
        "v1",
        "sessions on edge boxes should live 2 hours, not 30 minutes. 现场反馈：会话有效期应为 2 小时。",
        locator=message("atlas", cache, "msg-cache-0031", 31),
        title="#atlas-cache · Chen Jing · 2026-04-22 14:05",
        source_record_time="2026-04-22T14:05:00+08:00",
    )
    d.reference(
        "ref-changed-msg",
        "res-atlas-2026-05",
        "src-changed-msg",
        "v1",
        "512 MB RAM, one SD card, no on-call rotation at the sites",
        locator=message("atlas", cache, "msg-cache-0038", 38),
        title="#atlas-cache · Tom Becker · 2026-04-28 18:12",
        source_record_time="2026-04-28T18:12:00+08:00",
    )
    d.reference(
        "ref-deleted-msg",
        "res-atlas-2026-05",
        "src-deleted-msg",
        "v1",
        "staging Redis ran out of memory again last night, sessions got evicted and everyone was logged out.",
        text=DELETED_MSG_V1,
        locator=message("atlas", cache, "msg-cache-0025", 25),
        title="#atlas-cache · Wang Hao (deleted message)",
        availability="source_deleted",
    )
    for ref_id, fragment in (
        ("ref-revision-1", "we are revising the March decision to use Redis."),
        (
            "ref-revision-2",
            "Ops confirmed they cannot run Redis on the edge boxes: no on-call at the sites, 512 MB RAM, one SD card. "
            "运维确认边缘节点无法运维 Redis。",
        ),
        (
            "ref-revision-3",
            "replace Redis with SQLite in WAL mode, one database file per box. 会话缓存改用 SQLite（WAL 模式）。 "
            "This replaces Decision A for all new deployments",
        ),
    ):
        d.reference(
            ref_id,
            "res-atlas-2026-05",
            "src-msg-revision",
            "v1",
            fragment,
            locator=message("atlas", cache, "msg-cache-0040", 40),
            title="#atlas-cache · Mei Lin · 2026-05-02 09:17",
            source_record_time="2026-05-02T09:17:00+08:00",
        )
    d.reference(
        "ref-decision-b-msg",
        "res-atlas-2026-05",
        "src-msg-decision-b",
        "v1",
        "Confirmed in today's architecture sync: session cache = SQLite in WAL mode. 决定了，按这个方案走。",
        locator=message("atlas", cache, "msg-cache-0044", 44),
        title="#atlas-cache · Mei Lin · 2026-05-03 15:00",
        source_record_time="2026-05-03T15:00:00+08:00",
    )
    d.reference(
        "ref-load-test",
        "res-atlas-2026-05",
        "src-msg-load-test",
        "v1",
        "Load test summary (window 2026-04-01 → 2026-04-14): SQLite WAL handled 1,800 session writes/s on the "
        "reference edge box with p99 read latency 2.1 ms.",
        locator=message("atlas", "conv-atlas-ops", "msg-ops-0003", 3, role="assistant"),
        title="#atlas-ops · assistant summary · 2026-04-15",
        source_record_time="2026-04-15T09:00:00Z",
    )
    d.reference(
        "ref-moved-msg",
        "res-atlas-2026-05",
        "src-moved-msg",
        "v1",
        "exponential backoff starting at 500 ms, max 5 retries, then park the mutation in the offline queue.",
        locator=message("atlas", "conv-client-retry", "msg-retry-0007", 7),
        title="Client retry policy · Priya Nair · 2026-04-20 16:00",
        source_record_time="2026-04-20T16:00:00+08:00",
    )
    # res-atlas-2026-07
    d.reference(
        "ref-option-c-msg",
        "res-atlas-2026-07",
        "src-msg-option-c",
        "v1",
        "LMDB could be faster than SQLite WAL for our read-heavy lookups. Not proposing we switch — just an option "
        "to benchmark later.",
        locator=message("atlas", cache, "msg-cache-0057", 57),
        title="#atlas-cache · Wang Hao · 2026-06-20 16:45",
        source_record_time="2026-06-20T16:45:00+08:00",
    )
    d.reference(
        "ref-task-cache-migration",
        "res-atlas-2026-07",
        "src-task-cache-migration",
        "2026-07-10",
        "ATL-212 · Migrate session cache to SQLite WAL / 会话缓存迁移到 SQLite\nStatus: In progress (进行中)",
        source_type="task",
        locator={"project_id": "atlas", "task_id": "ATL-212", "external": {"tracker": "ATL", "task_key": "ATL-212"}},
        title="ATL-212 Migrate session cache to SQLite WAL",
        source_record_time="2026-07-10T11:00:00+08:00",
    )
    d.reference(
        "ref-kickoff-notes",
        "res-atlas-2026-07",
        "src-kickoff-notes",
        "v1",
        "Risks: session cache technology not chosen yet (会话缓存方案未定); edge boxes are small.",
        source_type="note",
        locator={"project_id": "atlas", "document_id": "doc-atlas-kickoff", "chunk_id": "risks"},
        title="Atlas kickoff notes, 2026-02-01",
        source_record_time="2026-02-01T10:00:00+08:00",
    )
    # Beacon, the pair and Global.
    d.reference(
        "ref-beacon-sync-1",
        "res-beacon-2026-06",
        "src-beacon-msg",
        "v1",
        "the app queues every mutation in a local SQLite table and replays it when the sync API is reachable.",
        locator=message("beacon", "conv-beacon-sync", "msg-bsync-0009", 9),
        title="#beacon-sync · Priya Nair · 2026-06-05 10:30",
        source_record_time="2026-06-05T10:30:00+08:00",
    )
    d.reference(
        "ref-beacon-session",
        "res-beacon-2026-06",
        "src-beacon-session-msg",
        "v1",
        "On the phone the session cache is just the auth token in the iOS Keychain / Android Keystore; "
        "手机端的会话缓存只保存令牌。",
        locator=message("beacon", "conv-beacon-sync", "msg-bsync-0015", 15),
        title="#beacon-sync · Liu Yang · 2026-06-12 11:00",
        source_record_time="2026-06-12T11:00:00+08:00",
    )
    d.reference(
        "ref-pair-api-freeze",
        "res-pair-2026-06",
        "src-pair-msg",
        "v1",
        "Atlas freezes sync API v3 today; Beacon 4.2 builds against it. 今天冻结 v3 接口，Beacon 4.2 基于它开发。",
        locator=message("atlas", "conv-release-2026-7", "msg-rel-0021", 21),
        title="#release-2026-7 · Chen Jing · 2026-06-15 18:00",
        source_record_time="2026-06-15T18:00:00+08:00",
    )
    d.reference(
        "ref-pair-go-no-go",
        "res-pair-2026-06",
        "src-pair-gonogo-msg",
        "v1",
        "Go/no-go: GO for 2026.7. Beacon 4.2 waits for one crash fix, Atlas ships on July 8.",
        locator=message("beacon", "conv-release-2026-7", "msg-rel-0034", 34),
        title="#release-2026-7 · Priya Nair · 2026-06-28 17:30",
        source_record_time="2026-06-28T17:30:00+08:00",
    )
    d.reference(
        "ref-global-adr",
        "res-global-2026-07",
        "src-global-note",
        "v1",
        "When a decision changes, write a new ADR that names the old one and says why — never edit the old one in "
        "place. 决策变更要新写一条 ADR，说明原因，不要改旧的。",
        source_type="note",
        locator={"document_id": "doc-eng-handbook", "chunk_id": "decisions"},
        title="Engineering handbook · Decisions",
        source_record_time="2026-07-01T09:00:00Z",
    )


def entity(
    d: Demo,
    entity_id: str,
    *,
    revisions: list[tuple[str, str | None, str, str, str]],
    rested_on: dict[str, list[str]] | None = None,
    **fields: Any,
) -> None:
    """An entity (its current projection) and its content per result.

    `revisions` holds `(result_id, revision, label, description, confirmation_state)`; `rested_on` the evidence a
    result's snapshot rested on, by result id. A revision not in it has no list of its own stored (unknown: the
    tools show the entity's current evidence, marked `evidence_basis: "object"`).
    """
    d.add("entity", id=entity_id, **fields)
    own = rested_on or {}
    for result_id, revision, label, description, state in revisions:
        d.add(
            "entity_revision",
            entity_id=entity_id,
            result_id=result_id,
            revision=revision,
            canonical_label=label,
            description=description,
            confirmation_state=state,
            recorded_at=RECORDED[result_id],
            **({"source_reference_ids": own[result_id]} if result_id in own else {}),
        )


LABEL_A = "Decision A: Redis as the session cache"
LABEL_B = "Decision B: SQLite in WAL mode as the session cache / 会话缓存改用 SQLite"
A_R2 = (
    "Redis as the session cache (会话缓存), one instance per region, sessions stored as hashes keyed by session id. "
    "Revised on 2026-05-02: ops cannot run Redis on the edge boxes."
)
B_R2 = (
    "SQLite in WAL mode, one database file per edge box, as the session cache. Decided on 2026-05-03; the migration "
    "task ATL-212 is in progress (进行中)."
)


def atlas_entities(d: Demo) -> None:
    entity(
        d,
        "ent-decision-a",
        story_line_id="sl-atlas-cache",
        entity_type="decision",
        canonical_label=LABEL_A,
        description=A_R2,
        confirmation_state="confirmed",
        decision_status="decided",
        updated_at=RECORDED["res-atlas-2026-05"],
        revision="ent-decision-a@r2",
        source_reference_ids=["ref-decision-a-msg", "ref-long-doc", "ref-revision-1"],
        # March rested on the decision message and the design notes; the May review on the revision message.
        rested_on={
            "res-atlas-2026-03": ["ref-decision-a-msg", "ref-long-doc"],
            "res-atlas-2026-05": ["ref-revision-1"],
        },
        revisions=[
            (
                "res-atlas-2026-03",
                "ent-decision-a@r1",
                LABEL_A,
                "Redis as the session cache, one instance per region, TTL 30 minutes to start.",
                "confirmed",
            ),
            ("res-atlas-2026-05", "ent-decision-a@r2", LABEL_A, A_R2, "confirmed"),
        ],
    )
    entity(
        d,
        "ent-decision-b",
        story_line_id="sl-atlas-cache",
        entity_type="decision",
        canonical_label=LABEL_B,
        description=B_R2,
        confirmation_state="confirmed",
        decision_status="decided",
        work_status=None,
        updated_at=RECORDED["res-atlas-2026-07"],
        revision="ent-decision-b@r2",
        source_reference_ids=["ref-revision-3", "ref-decision-b-msg", "ref-task-cache-migration"],
        rested_on={
            "res-atlas-2026-05": ["ref-decision-b-msg", "ref-revision-3"],
            "res-atlas-2026-07": ["ref-decision-b-msg", "ref-task-cache-migration"],
        },
        revisions=[
            (
                "res-atlas-2026-05",
                "ent-decision-b@r1",
                LABEL_B,
                "Replace Redis with SQLite in WAL mode for the session cache. 会话缓存改用 SQLite（WAL 模式）。",
                "confirmed",
            ),
            ("res-atlas-2026-07", "ent-decision-b@r2", LABEL_B, B_R2, "confirmed"),
        ],
    )
    option_c = "LMDB as an embedded key-value store for sessions; raised as an option to benchmark, not a switch."
    entity(
        d,
        "ent-option-c",
        story_line_id="sl-atlas-cache",
        entity_type="option",
        canonical_label="Option C: LMDB embedded store",
        description=option_c,
        updated_at=RECORDED["res-atlas-2026-07"],
        revision="ent-option-c@r1",
        source_reference_ids=["ref-option-c-msg"],
        rested_on={"res-atlas-2026-07": ["ref-option-c-msg"]},
        revisions=[("res-atlas-2026-07", "ent-option-c@r1", "Option C: LMDB embedded store", option_c, "automatic")],
    )
    ttl_30 = "Sessions expire after 30 minutes, set together with Decision A 'for now'."
    entity(
        d,
        "ent-ttl-30m",
        story_line_id="sl-atlas-cache",
        entity_type="parameter",
        canonical_label="Session TTL: 30 minutes / 会话 TTL 30 分钟",
        description=ttl_30,
        updated_at=RECORDED["res-atlas-2026-03"],
        revision="ent-ttl-30m@r1",
        source_reference_ids=["ref-ttl-30m"],
        rested_on={"res-atlas-2026-03": ["ref-ttl-30m"]},
        revisions=[
            ("res-atlas-2026-03", "ent-ttl-30m@r1", "Session TTL: 30 minutes / 会话 TTL 30 分钟", ttl_30, "automatic")
        ],
    )
    ttl_2h = "The field pilot asks for 2-hour sessions on edge boxes so technicians stay logged in for a shift."
    entity(
        d,
        "ent-ttl-2h",
        story_line_id="sl-atlas-cache",
        entity_type="parameter",
        canonical_label="Session TTL: 2 hours / 会话 TTL 2 小时",
        description=ttl_2h,
        updated_at=RECORDED["res-atlas-2026-05"],
        revision="ent-ttl-2h@r1",
        source_reference_ids=["ref-ttl-2h"],
        rested_on={"res-atlas-2026-05": ["ref-ttl-2h"]},
        revisions=[
            ("res-atlas-2026-05", "ent-ttl-2h@r1", "Session TTL: 2 hours / 会话 TTL 2 小时", ttl_2h, "automatic")
        ],
    )
    edge_label = "Edge boxes cannot run Redis / 边缘节点无法运维 Redis"
    edge_user = (
        "Edge boxes have no on-call and a single SD card, so ops will not run Redis there. "
        "(Edited by Tom: RAM figure removed, the 512 MB in the original message was the old model.)"
    )
    entity(
        d,
        "ent-edge-box-constraint",
        story_line_id="sl-atlas-cache",
        entity_type="constraint",
        canonical_label=edge_label,
        description=edge_user,
        confirmation_state="user_edited",
        updated_at="2026-06-02T09:00:00+08:00",
        revision="ent-edge-box-constraint@r1-edited",
        source_reference_ids=["ref-changed-msg", "ref-revision-2"],
        # Its May snapshot (the 512 MB figure) has no list of its own: imported before revisions stored one.
        revisions=[
            (
                "res-atlas-2026-05",
                "ent-edge-box-constraint@r1",
                edge_label,
                "Edge boxes have 512 MB RAM, one SD card and no on-call; Redis is not realistic there.",
                "automatic",
            )
        ],
    )
    cluster = "Option: Redis Cluster on every edge box"
    entity(
        d,
        "ent-option-redis-cluster",
        story_line_id="sl-atlas-cache",
        entity_type="option",
        canonical_label=cluster,
        description="Extracted from a joking remark in #atlas-cache; revoked by the user, it was never an option.",
        confirmation_state="revoked",
        updated_at="2026-04-02T10:00:00+08:00",
        source_reference_ids=["ref-redis-cluster-joke"],
        revisions=[
            ("res-atlas-2026-03", None, cluster, "Run a Redis Cluster with 3 nodes per edge box.", "automatic"),
        ],
    )
    task = (
        "Task record ATL-212, status in progress (进行中). Done: schema and WAL settings, edge image. "
        "Todo: move cloud sessions off Redis, remove Redis from provisioning, nightly backup."
    )
    entity(
        d,
        "ent-task-cache-migration",
        story_line_id="sl-atlas-cache",
        entity_type="task",
        canonical_label="ATL-212: migrate the session cache to SQLite WAL",
        description=task,
        work_status="in_progress",
        updated_at=RECORDED["res-atlas-2026-07"],
        revision="ent-task-cache-migration@r1",
        source_reference_ids=["ref-task-cache-migration"],
        rested_on={"res-atlas-2026-07": ["ref-task-cache-migration"]},
        revisions=[
            (
                "res-atlas-2026-07",
                "ent-task-cache-migration@r1",
                "ATL-212: migrate the session cache to SQLite WAL",
                task,
                "automatic",
            )
        ],
    )


def atlas_events(d: Demo) -> None:
    event(
        d,
        "evt-decision-a",
        "res-atlas-2026-03",
        story_line_id="sl-atlas-cache",
        event_type="decision",
        title="Decision A: use Redis as the session cache / 会话缓存用 Redis",
        description="Mei Lin announces Redis, one instance per region, as the session cache; TTL 30 minutes for now.",
        event_time=when("2026-03-10T11:20:00+08:00", "minute", "message_time"),
        confirmation_state="confirmed",
        revision="evt-decision-a@1",
        entity_ids=["ent-decision-a", "ent-ttl-30m"],
        source_reference_ids=["ref-decision-a-msg", "ref-ttl-30m", "ref-long-doc"],
    )
    event(
        d,
        "evt-unknown-time-2",
        "res-atlas-2026-03",
        event_type="discussion",
        title="Logout did not invalidate sessions on one node / 退出登录后会话未失效",
        description="Old standup notes mention a cache invalidation bug on logout. The notes give no date for it.",
        event_time=None,
        revision="evt-unknown-time-2@1",
        source_reference_ids=["ref-no-locator"],
    )
    event(
        d,
        "evt-load-test-window",
        "res-atlas-2026-05",
        story_line_id="sl-atlas-cache",
        event_type="milestone",
        title="Load test of SQLite WAL on the reference edge box / SQLite WAL 压测",
        description="Two-week load test: 1,800 session writes/s, p99 read latency 2.1 ms. The review revised the "
        "window from 'first week of April' to April 1–14.",
        # Day precision: April 14 is a whole day of the window, so the interval ends at its last millisecond (as the
        # GoodBuddy import stores a bare date); ending at 00:00 left the afternoon of April 14 outside the test.
        event_time=when("2026-04-01T00:00:00Z", "day", "stated_in_source", end="2026-04-14T23:59:59.999Z"),
        confirmation_state="revised",
        revision="evt-load-test-window@2",
        entity_ids=["ent-decision-b"],
        source_reference_ids=["ref-load-test"],
    )
    event(
        d,
        "evt-retry-policy",
        "res-atlas-2026-05",
        event_type="discussion",
        title="Client retry policy against the sync API / 客户端重试策略",
        description="Exponential backoff from 500 ms, at most 5 retries, then the mutation waits in the offline queue.",
        event_time=when("2026-04-20T16:00:00+08:00", "minute", "message_time"),
        revision="evt-retry-policy@1",
        source_reference_ids=["ref-moved-msg"],
    )
    event(
        d,
        "evt-unknown-time-1",
        "res-atlas-2026-05",
        story_line_id="sl-atlas-cache",
        event_type="discussion",
        title="Staging Redis ran out of memory / 预发环境 Redis 内存耗尽",
        description="A message says staging Redis ran out of memory 'again last night' and evicted every session. "
        "The review did not date it, and the message has since been deleted.",
        event_time=None,
        revision="evt-unknown-time-1@1",
        entity_ids=["ent-decision-a"],
        source_reference_ids=["ref-deleted-msg"],
    )
    event(
        d,
        "evt-revision-a-to-b",
        "res-atlas-2026-05",
        story_line_id="sl-atlas-cache",
        event_type="change",
        title="Session cache plan revised: Redis → SQLite WAL / 会话缓存方案调整",
        description="Mei Lin revises the March decision: ops cannot run Redis on the edge boxes (no on-call, one SD "
        "card), so the session cache moves to SQLite in WAL mode, one file per box. The message says this replaces "
        "Decision A for all new deployments; the cloud Redis stays until the migration is done.",
        event_time=when("2026-05-02T09:17:00+08:00", "minute", "message_time"),
        confirmation_state="confirmed",
        revision="evt-revision-a-to-b@1",
        entity_ids=["ent-decision-a", "ent-decision-b", "ent-edge-box-constraint"],
        source_reference_ids=["ref-revision-1", "ref-revision-2", "ref-revision-3"],
    )
    event(
        d,
        "evt-decision-b",
        "res-atlas-2026-05",
        story_line_id="sl-atlas-cache",
        event_type="decision",
        title="Decision B: SQLite in WAL mode as the session cache / 决定：会话缓存改用 SQLite",
        description="Confirmed in the architecture sync on 2026-05-03. The migration is tracked as task ATL-212.",
        event_time=when("2026-05-03T15:00:00+08:00", "minute", "message_time"),
        confirmation_state="confirmed",
        revision="evt-decision-b@1",
        entity_ids=["ent-decision-b"],
        source_reference_ids=["ref-decision-b-msg", "ref-revision-3"],
    )
    # res-atlas-2026-07 is an old-format record: its objects carry no revision.
    event(
        d,
        "evt-option-c",
        "res-atlas-2026-07",
        story_line_id="sl-atlas-cache",
        event_type="discussion",
        title="Option C raised: LMDB embedded store / 备选方案：LMDB",
        description="Wang Hao asks whether LMDB could be faster than SQLite WAL for read-heavy lookups, and says "
        "explicitly that he is not proposing a switch.",
        event_time=when("2026-06-20T16:45:00+08:00", "minute", "message_time"),
        entity_ids=["ent-option-c", "ent-decision-b"],
        source_reference_ids=["ref-option-c-msg"],
    )
    event(
        d,
        "evt-late-recorded-kickoff",
        "res-atlas-2026-07",
        story_line_id="sl-atlas-cache",
        event_type="milestone",
        title="Atlas kickoff: session cache named as an open risk / 项目启动会",
        description="The kickoff notes of 2026-02-01, uploaded only in July, list 'session cache technology not "
        "chosen yet' as a risk.",
        event_time=when("2026-02-01T10:00:00+08:00", "day", "stated_in_source"),
        source_reference_ids=["ref-kickoff-notes"],
    )


def change(d: Demo, entity_id: str, key: str, result_id: str, change_type: str, **fields: Any) -> None:
    d.add(
        "entity_change",
        entity_id=entity_id,
        association_key=key,
        result_id=result_id,
        change_type=change_type,
        recorded_at=RECORDED[result_id],
        **fields,
    )


def atlas_changes(d: Demo) -> None:
    change(
        d,
        "ent-decision-a",
        "proposed-2026-03",
        "res-atlas-2026-03",
        "proposed",
        event_id="evt-decision-a",
        description="Redis proposed as the session cache in #atlas-cache.",
        entity_revision="ent-decision-a@r1",
        applicable_from="2026-03-10T11:20:00+08:00",
        source_reference_ids=["ref-decision-a-msg"],
    )
    change(
        d,
        "ent-decision-a",
        "added-2026-03",
        "res-atlas-2026-03",
        "added",
        event_id="evt-decision-a",
        description="Decision recorded: Redis, one instance per region, TTL 30 minutes to start.",
        entity_revision="ent-decision-a@r1",
        applicable_from="2026-03-10T11:20:00+08:00",
        confirmation_state="confirmed",
        source_reference_ids=["ref-decision-a-msg", "ref-ttl-30m"],
    )
    change(
        d,
        "ent-decision-a",
        "revised-2026-05",
        "res-atlas-2026-05",
        "revised",
        event_id="evt-revision-a-to-b",
        description="Revised by the 2026-05-02 message: ops cannot run Redis on the edge boxes.",
        entity_revision="ent-decision-a@r2",
        confirmation_state="confirmed",
        source_reference_ids=["ref-revision-1", "ref-revision-2"],
    )
    change(
        d,
        "ent-decision-b",
        "proposed-2026-05",
        "res-atlas-2026-05",
        "proposed",
        event_id="evt-revision-a-to-b",
        description="SQLite in WAL mode proposed to replace Redis as the session cache.",
        entity_revision="ent-decision-b@r1",
        applicable_from="2026-05-02T09:17:00+08:00",
        source_reference_ids=["ref-revision-3"],
    )
    change(
        d,
        "ent-decision-b",
        "verified-2026-05",
        "res-atlas-2026-05",
        "verified",
        event_id="evt-decision-b",
        description="Confirmed in the architecture sync on 2026-05-03.",
        entity_revision="ent-decision-b@r1",
        applicable_from="2026-05-03T15:00:00+08:00",
        confirmation_state="confirmed",
        source_reference_ids=["ref-decision-b-msg"],
    )
    change(
        d,
        "ent-decision-b",
        "added-2026-07",
        "res-atlas-2026-07",
        "added",
        description="Migration task ATL-212 recorded with status in progress (进行中).",
        entity_revision="ent-decision-b@r2",
        source_reference_ids=["ref-task-cache-migration"],
    )
    change(
        d,
        "ent-option-c",
        "added-2026-07",
        "res-atlas-2026-07",
        "added",
        event_id="evt-option-c",
        description="LMDB raised as an option to benchmark.",
        entity_revision="ent-option-c@r1",
        source_reference_ids=["ref-option-c-msg"],
    )
    change(
        d,
        "ent-ttl-2h",
        "added-2026-05",
        "res-atlas-2026-05",
        "added",
        description="The field pilot asks for a 2-hour session TTL.",
        entity_revision="ent-ttl-2h@r1",
        source_reference_ids=["ref-ttl-2h"],
    )


def relation(d: Demo, relation_id: str, result_id: str, from_ref: Line, to_ref: Line, **fields: Any) -> None:
    d.add(
        "relation",
        id=relation_id,
        result_id=result_id,
        from_ref=from_ref,
        to_ref=to_ref,
        recorded_at=RECORDED[result_id],
        **fields,
    )


def atlas_relations(d: Demo) -> None:
    a, b, c = ref("entity", "ent-decision-a"), ref("entity", "ent-decision-b"), ref("entity", "ent-option-c")
    relation(
        d,
        "rel-revoked-redis-cluster",
        "res-atlas-2026-03",
        ref("entity", "ent-option-redis-cluster"),
        a,
        relation_type="supports",
        reason="Auto-extracted: 'we'll need a Redis Cluster with 3 nodes per edge box' (said as a joke).",
        confirmation_state="revoked",
        revision="rel-revoked-redis-cluster@1",
        source_reference_ids=["ref-redis-cluster-joke"],
    )
    relation(
        d,
        "rel-b-revised-a",
        "res-atlas-2026-05",
        b,
        a,
        relation_type="revised",
        reason="会话缓存从 Redis 改为 SQLite WAL: 'we are revising the March decision to use Redis' because ops "
        "cannot run Redis on the edge boxes.",
        confirmation_state="confirmed",
        revision="rel-b-revised-a@1",
        source_reference_ids=["ref-revision-1", "ref-revision-2"],
    )
    relation(
        d,
        "rel-b-replaces-a",
        "res-atlas-2026-05",
        b,
        a,
        relation_type="replaces",
        reason="Explicit in the 2026-05-02 message: 'This replaces Decision A for all new deployments', because ops "
        "cannot run Redis on the edge boxes.",
        confirmation_state="confirmed",
        revision="rel-b-replaces-a@1",
        source_reference_ids=["ref-revision-1", "ref-revision-2", "ref-revision-3"],
    )
    relation(
        d,
        "rel-ttl-conflict",
        "res-atlas-2026-05",
        ref("entity", "ent-ttl-2h"),
        ref("entity", "ent-ttl-30m"),
        relation_type="contrasts",
        reason="Two session TTLs are on record: 30 minutes (2026-03-10) and 2 hours (2026-04-22). "
        "没有找到确定哪一个的记录。",
        revision="rel-ttl-conflict@1",
        source_reference_ids=["ref-ttl-2h"],
    )
    relation(
        d,
        "rel-constraint-supports-b",
        "res-atlas-2026-05",
        ref("entity", "ent-edge-box-constraint"),
        b,
        relation_type="supports",
        reason="Edge boxes cannot run Redis, which is why the session cache moves to SQLite.",
        revision="rel-constraint-supports-b@1",
        source_reference_ids=["ref-revision-2"],
    )
    relation(
        d,
        "rel-load-test-supports-b",
        "res-atlas-2026-05",
        ref("event", "evt-load-test-window"),
        b,
        relation_type="supports",
        reason="Load test: 1,800 writes/s and p99 2.1 ms on SQLite WAL.",
        revision="rel-load-test-supports-b@1",
        source_reference_ids=["ref-load-test"],
    )
    relation(
        d,
        "rel-c-contrasts-b",
        "res-atlas-2026-07",
        c,
        b,
        relation_type="contrasts",
        reason="LMDB could be faster than SQLite WAL for read-heavy lookups.",
        source_reference_ids=["ref-option-c-msg"],
    )
    relation(
        d,
        "rel-task-depends-on-b",
        "res-atlas-2026-07",
        ref("entity", "ent-task-cache-migration"),
        b,
        relation_type="depends-on",
        reason="ATL-212 carries out Decision B.",
        source_reference_ids=["ref-task-cache-migration"],
    )


def atlas_summaries_and_leaves(d: Demo) -> None:
    d.add(
        "summary",
        id="sum-atlas-2026-03",
        result_id="res-atlas-2026-03",
        interval={"from": "2026-03-01T00:00:00+08:00", "to": "2026-03-31T23:59:59+08:00"},
        body="March: the team chose Redis as the session cache (会话缓存), one instance per region, with a 30-minute "
        "TTL to start. A joking 'Redis Cluster' remark was extracted as an option and later revoked by the user. "
        "The long design notes were read in full.",
        open_items=["Provision Redis on the edge boxes (Tom)", "会话 TTL 是否够用，等现场反馈"],
        recorded_at=RECORDED["res-atlas-2026-03"],
        revision="sum-atlas-2026-03@1",
        fact_refs=[
            ref("event", "evt-decision-a"),
            ref("entity", "ent-decision-a"),
            ref("entity", "ent-ttl-30m"),
            ref("relation", "rel-revoked-redis-cluster"),
        ],
        source_reference_ids=["ref-decision-a-msg", "ref-long-doc"],
    )
    d.add(
        "summary",
        id="sum-atlas-2026-05",
        result_id="res-atlas-2026-05",
        interval={"from": "2026-04-01T00:00:00+08:00", "to": "2026-05-31T23:59:59+08:00"},
        body="April–May: Decision A (Redis) was revised. Ops cannot run Redis on the edge boxes, so on 2026-05-03 "
        "the team decided to use SQLite in WAL mode as the session cache — 会话缓存改用 SQLite（WAL 模式）。 "
        "The load test of April 1–14 backs the choice. The migration had not started in this period. "
        "Two session TTLs (30 minutes and 2 hours) are on record with no decision between them.",
        open_items=[
            "会话 TTL：30 分钟还是 2 小时？没有定论",
            "Move the cloud sessions off Redis",
            "Part of the design notes was not processed in this run (see coverage)",
        ],
        recorded_at=RECORDED["res-atlas-2026-05"],
        revision="sum-atlas-2026-05@1",
        fact_refs=[
            ref("event", "evt-revision-a-to-b"),
            ref("event", "evt-decision-b"),
            ref("event", "evt-load-test-window"),
            ref("entity", "ent-decision-a"),
            ref("entity", "ent-decision-b"),
            ref("relation", "rel-b-revised-a"),
            ref("relation", "rel-b-replaces-a"),
            ref("relation", "rel-ttl-conflict"),
        ],
        source_reference_ids=["ref-revision-1", "ref-decision-b-msg"],
    )
    d.add(
        "summary",
        id="sum-atlas-2026-07",
        result_id="res-atlas-2026-07",
        interval={"from": "2026-06-01T00:00:00+08:00", "to": "2026-07-15T18:00:00+08:00"},
        body="June to mid-July: migration task ATL-212 is in progress (进行中). Wang Hao raised LMDB as an option to "
        "benchmark (Option C); nobody proposed replacing SQLite. The February kickoff notes turned up and were "
        "recorded late.",
        open_items=["Benchmark LMDB against SQLite WAL?", "Finish ATL-212"],
        recorded_at=RECORDED["res-atlas-2026-07"],
        fact_refs=[
            ref("event", "evt-option-c"),
            ref("entity", "ent-option-c"),
            ref("relation", "rel-c-contrasts-b"),
            ref("entity", "ent-task-cache-migration"),
            ref("event", "evt-late-recorded-kickoff"),
        ],
        source_reference_ids=["ref-task-cache-migration", "ref-option-c-msg"],
    )
    leaves: list[tuple[str, str, str, list[tuple[Line, str | None]]]] = [
        (
            "leaf-atlas-2026-03-a",
            "res-atlas-2026-03",
            "#atlas-cache, March 1–15",
            [
                (ref("event", "evt-decision-a"), "Team picks Redis for sessions, one instance per region."),
                (ref("entity", "ent-decision-a"), "Redis session cache per region; TTL 30 min; Tom provisions it."),
                (ref("entity", "ent-ttl-30m"), "会话 30 分钟过期（暂定）。"),
                (ref("entity", "ent-option-redis-cluster"), "Redis Cluster with 3 nodes per edge box mentioned."),
                (ref("relation", "rel-revoked-redis-cluster"), None),
            ],
        ),
        (
            "leaf-atlas-2026-03-b",
            "res-atlas-2026-03",
            "Design notes and January standup notes",
            [
                (ref("entity", "ent-decision-a"), "The design notes assume a Redis-backed session store."),
                (ref("event", "evt-unknown-time-2"), "Logout bug: sessions outlived logout on one node (undated)."),
            ],
        ),
        (
            "leaf-atlas-2026-05-a",
            "res-atlas-2026-05",
            "#atlas-cache, April 20 – May 3",
            [
                (ref("event", "evt-revision-a-to-b"), "Ops can't operate Redis at the edge; the plan moves to SQLite."),
                (ref("entity", "ent-decision-b"), "SQLite WAL 已决定；迁移尚未开始。"),
                (ref("entity", "ent-decision-a"), "Redis decision revised, see the message of 2026-05-02."),
                (ref("relation", "rel-b-replaces-a"), "The message says B replaces A for new deployments."),
                (ref("entity", "ent-ttl-2h"), "Field pilot wants 2-hour sessions."),
                (ref("relation", "rel-ttl-conflict"), "TTL 30 min vs 2 h, unresolved."),
                (ref("entity", "ent-edge-box-constraint"), "Edge boxes: 512 MB RAM, one SD card, no on-call."),
            ],
        ),
        (
            "leaf-atlas-2026-05-b",
            "res-atlas-2026-05",
            "#atlas-ops and client threads, April",
            [
                (ref("event", "evt-load-test-window"), "Load test ran April 1–14 on the reference box."),
                (ref("event", "evt-retry-policy"), "Client backoff: 500 ms, 5 retries, then offline queue."),
                (ref("event", "evt-unknown-time-1"), "Staging Redis OOM, date not given."),
            ],
        ),
        (
            "leaf-atlas-2026-07-a",
            "res-atlas-2026-07",
            "#atlas-cache June–July, task ATL-212, kickoff notes",
            [
                (ref("event", "evt-option-c"), "LMDB floated as a possibly faster store; benchmark only."),
                (ref("entity", "ent-option-c"), "LMDB option, not a proposal to switch."),
                (ref("entity", "ent-task-cache-migration"), "ATL-212 进行中。"),
                (ref("entity", "ent-decision-b"), "Decision B stands; its migration is in progress."),
                (
                    ref("event", "evt-late-recorded-kickoff"),
                    "Kickoff on 2026-02-01 flagged the cache choice as a risk.",
                ),
            ],
        ),
    ]
    for leaf_id, result_id, summary, facts in leaves:
        d.add(
            "leaf",
            id=leaf_id,
            result_id=result_id,
            summary=summary,
            recorded_at=RECORDED[result_id],
            facts=[{"object_ref": object_ref, "description": text} for object_ref, text in facts],
        )


def other_scopes(d: Demo) -> None:
    # Beacon
    queue = "Mutations are queued in a local SQLite table on the phone and replayed when the sync API is reachable."
    entity(
        d,
        "ent-beacon-offline-queue",
        story_line_id="sl-beacon-sync",
        entity_type="decision",
        canonical_label="Offline queue in on-device SQLite / 本地离线队列",
        description=queue,
        confirmation_state="confirmed",
        decision_status="decided",
        updated_at=RECORDED["res-beacon-2026-06"],
        revision="ent-beacon-offline-queue@r1",
        source_reference_ids=["ref-beacon-sync-1"],
        rested_on={"res-beacon-2026-06": ["ref-beacon-sync-1"]},
        revisions=[
            (
                "res-beacon-2026-06",
                "ent-beacon-offline-queue@r1",
                "Offline queue in on-device SQLite / 本地离线队列",
                queue,
                "confirmed",
            )
        ],
    )
    token = "On the phone the session cache holds only the auth token (iOS Keychain / Android Keystore)."
    entity(
        d,
        "ent-beacon-session-cache",
        story_line_id="sl-beacon-sync",
        entity_type="concept",
        canonical_label="Beacon session cache: token only / 手机端会话缓存",
        description=token,
        updated_at=RECORDED["res-beacon-2026-06"],
        revision="ent-beacon-session-cache@r1",
        source_reference_ids=["ref-beacon-session"],
        rested_on={"res-beacon-2026-06": ["ref-beacon-session"]},
        revisions=[
            (
                "res-beacon-2026-06",
                "ent-beacon-session-cache@r1",
                "Beacon session cache: token only / 手机端会话缓存",
                token,
                "automatic",
            )
        ],
    )
    event(
        d,
        "evt-beacon-offline-queue",
        "res-beacon-2026-06",
        story_line_id="sl-beacon-sync",
        event_type="decision",
        title="Beacon goes offline-first with a local queue / 离线优先",
        description="Priya: every mutation is written to the on-device queue first and replayed after reconnecting.",
        event_time=when("2026-06-05T10:30:00+08:00", "minute", "message_time"),
        confirmation_state="confirmed",
        revision="evt-beacon-offline-queue@1",
        entity_ids=["ent-beacon-offline-queue"],
        source_reference_ids=["ref-beacon-sync-1"],
    )
    event(
        d,
        "evt-beacon-session-cache",
        "res-beacon-2026-06",
        story_line_id="sl-beacon-sync",
        event_type="discussion",
        title="Beacon session cache keeps only the token / 会话缓存只存令牌",
        description="Liu Yang: no server-side session state for Beacon; the phone keeps the token in the keychain.",
        event_time=when("2026-06-12T11:00:00+08:00", "minute", "message_time"),
        revision="evt-beacon-session-cache@1",
        entity_ids=["ent-beacon-session-cache"],
        source_reference_ids=["ref-beacon-session"],
    )
    d.add(
        "summary",
        id="sum-beacon-2026-06",
        result_id="res-beacon-2026-06",
        interval={"from": "2026-06-01T00:00:00+08:00", "to": "2026-06-30T23:59:59+08:00"},
        body="June: Beacon goes offline-first; mutations wait in an on-device SQLite queue and are replayed. "
        "The mobile session cache (会话缓存) holds only the token in the Keychain / Keystore.",
        open_items=["Conflict handling when two devices edit the same record offline"],
        recorded_at=RECORDED["res-beacon-2026-06"],
        revision="sum-beacon-2026-06@1",
        fact_refs=[ref("event", "evt-beacon-offline-queue"), ref("entity", "ent-beacon-session-cache")],
        source_reference_ids=["ref-beacon-sync-1"],
    )
    d.add(
        "leaf",
        id="leaf-beacon-2026-06-a",
        result_id="res-beacon-2026-06",
        summary="#beacon-sync, June",
        recorded_at=RECORDED["res-beacon-2026-06"],
        facts=[
            {"object_ref": ref("event", "evt-beacon-offline-queue"), "description": "离线队列：先落盘，再同步。"},
            {"object_ref": ref("entity", "ent-beacon-session-cache"), "description": "Token-only session on device."},
        ],
    )
    # Atlas + Beacon
    api = "Sync API v3 is the contract both apps build against for release 2026.7; frozen on June 15."
    entity(
        d,
        "ent-pair-sync-api-v3",
        story_line_id="sl-pair-release",
        entity_type="decision",
        canonical_label="Sync API v3 for release 2026.7 / v3 接口",
        description=api,
        confirmation_state="confirmed",
        decision_status="decided",
        updated_at=RECORDED["res-pair-2026-06"],
        revision="ent-pair-sync-api-v3@r1",
        source_reference_ids=["ref-pair-api-freeze"],
        rested_on={"res-pair-2026-06": ["ref-pair-api-freeze"]},
        revisions=[
            (
                "res-pair-2026-06",
                "ent-pair-sync-api-v3@r1",
                "Sync API v3 for release 2026.7 / v3 接口",
                api,
                "confirmed",
            )
        ],
    )
    event(
        d,
        "evt-pair-api-freeze",
        "res-pair-2026-06",
        story_line_id="sl-pair-release",
        event_type="milestone",
        title="Sync API v3 frozen for release 2026.7 / 接口冻结",
        description="Atlas freezes sync API v3; Beacon 4.2 builds against it.",
        event_time=when("2026-06-15T18:00:00+08:00", "minute", "message_time"),
        confirmation_state="confirmed",
        revision="evt-pair-api-freeze@1",
        entity_ids=["ent-pair-sync-api-v3"],
        source_reference_ids=["ref-pair-api-freeze"],
    )
    event(
        d,
        "evt-pair-go-no-go",
        "res-pair-2026-06",
        story_line_id="sl-pair-release",
        event_type="decision",
        title="Go/no-go for release 2026.7: GO / 可以发布",
        description="GO for 2026.7; Beacon 4.2 waits for one crash fix, Atlas ships on July 8.",
        event_time=when("2026-06-28T17:30:00+08:00", "minute", "message_time"),
        revision="evt-pair-go-no-go@1",
        source_reference_ids=["ref-pair-go-no-go"],
    )
    d.add(
        "summary",
        id="sum-pair-2026-06",
        result_id="res-pair-2026-06",
        interval={"from": "2026-06-01T00:00:00+08:00", "to": "2026-06-30T23:59:59+08:00"},
        body="Joint release 2026.7 (联合发布): sync API v3 was frozen on June 15 and the go/no-go on June 28 was GO.",
        open_items=["Beacon 4.2 crash fix before its store submission"],
        recorded_at=RECORDED["res-pair-2026-06"],
        revision="sum-pair-2026-06@1",
        fact_refs=[
            ref("event", "evt-pair-api-freeze"),
            ref("event", "evt-pair-go-no-go"),
            ref("entity", "ent-pair-sync-api-v3"),
        ],
        source_reference_ids=["ref-pair-api-freeze", "ref-pair-go-no-go"],
    )
    d.add(
        "leaf",
        id="leaf-pair-2026-06-a",
        result_id="res-pair-2026-06",
        summary="#release-2026-7, June",
        recorded_at=RECORDED["res-pair-2026-06"],
        facts=[
            {"object_ref": ref("event", "evt-pair-api-freeze"), "description": "v3 frozen mid-June."},
            {"object_ref": ref("event", "evt-pair-go-no-go"), "description": "Release approved with one open fix."},
        ],
    )
    # Global
    adr = "When a decision changes, write a new ADR that names the old one and says why; never edit the old one."
    entity(
        d,
        "ent-global-adr-practice",
        story_line_id="sl-global-practices",
        entity_type="practice",
        canonical_label="Write a new ADR when a decision changes / 决策变更新写 ADR",
        description=adr,
        confirmation_state="confirmed",
        decision_status="decided",
        updated_at=RECORDED["res-global-2026-07"],
        revision="ent-global-adr-practice@r1",
        source_reference_ids=["ref-global-adr"],
        rested_on={"res-global-2026-07": ["ref-global-adr"]},
        revisions=[
            (
                "res-global-2026-07",
                "ent-global-adr-practice@r1",
                "Write a new ADR when a decision changes / 决策变更新写 ADR",
                adr,
                "confirmed",
            )
        ],
    )
    event(
        d,
        "evt-global-adr-template",
        "res-global-2026-07",
        story_line_id="sl-global-practices",
        event_type="decision",
        title="Adopt a lightweight ADR template / 采用决策记录模板",
        description="The engineering handbook gains a Decisions page with a short ADR template.",
        event_time=when("2026-07-01T09:00:00Z", "day", "stated_in_source"),
        confirmation_state="confirmed",
        revision="evt-global-adr-template@1",
        entity_ids=["ent-global-adr-practice"],
        source_reference_ids=["ref-global-adr"],
    )
    d.add(
        "summary",
        id="sum-global-2026-07",
        result_id="res-global-2026-07",
        interval={"from": "2026-07-01T00:00:00Z", "to": "2026-07-31T23:59:59Z"},
        body="July, across teams: a lightweight ADR template (决策记录模板) was adopted. The handbook review cited the "
        "Atlas 会话缓存 change as an example of a revision that lived only in chat.",
        open_items=["Backfill ADRs for decisions made before July"],
        recorded_at=RECORDED["res-global-2026-07"],
        revision="sum-global-2026-07@1",
        fact_refs=[ref("event", "evt-global-adr-template"), ref("entity", "ent-global-adr-practice")],
        source_reference_ids=["ref-global-adr"],
    )
    d.add(
        "leaf",
        id="leaf-global-2026-07-a",
        result_id="res-global-2026-07",
        summary="Engineering handbook, July",
        recorded_at=RECORDED["res-global-2026-07"],
        facts=[{"object_ref": ref("entity", "ent-global-adr-practice"), "description": "新决策写新 ADR，旧的不改。"}],
    )
    # Legacy (an inactive project: stored, but no scope containing it can be read)
    event(
        d,
        "evt-legacy-csv-import",
        "res-legacy-2025-11",
        story_line_id="sl-legacy-import",
        event_type="milestone",
        title="CSV importer retired / CSV 导入器下线",
        description="The nightly CSV import was switched off after the last customer moved to the sync API.",
        event_time=when("2025-11-20T00:00:00+08:00", "day", "stated_in_source"),
    )
    d.add(
        "summary",
        id="sum-legacy-2025-11",
        result_id="res-legacy-2025-11",
        body="November 2025: the legacy CSV importer was retired.",
        recorded_at=RECORDED["res-legacy-2025-11"],
        fact_refs=[ref("event", "evt-legacy-csv-import")],
    )


def memory_items(d: Demo) -> None:
    d.add(
        "memory_item",
        id="mem-global-answer-style",
        project_id=None,
        body="Answer in English; keep Chinese terms and names as written (e.g. 会话缓存), don't translate them. "
        "回答用英文，中文术语保持原文。",
        confirmation_state="confirmed",
        updated_at="2026-02-20T09:00:00+08:00",
    )
    d.add(
        "memory_item",
        id="mem-atlas-boring-tech",
        project_id="atlas",
        body="Prefer boring, embedded technology the team already operates (SQLite, plain files) over adding a new "
        "storage engine. 技术选型偏保守：优先团队已经熟悉、可嵌入的方案。",
        confirmation_state="confirmed",
        updated_at="2026-05-05T10:00:00+08:00",
    )
    d.add(
        "memory_item",
        id="mem-beacon-offline-first",
        project_id="beacon",
        body="Beacon is offline-first: every feature must work without a network and sync later. 离线优先。",
        confirmation_state="confirmed",
        updated_at="2026-06-01T09:00:00+08:00",
    )


def build() -> list[Line]:
    d = Demo()
    projects_and_scopes(d)
    atlas_sources(d)
    other_sources(d)
    results(d)
    references(d)
    atlas_entities(d)
    atlas_events(d)
    atlas_changes(d)
    atlas_relations(d)
    atlas_summaries_and_leaves(d)
    other_scopes(d)
    memory_items(d)
    stories_and_experiences(d)
    order = {kind: index for index, kind in enumerate(KIND_ORDER)}
    return sorted(d.lines, key=lambda line: order[line["kind"]])


def encoded() -> bytes:
    """The demo graph as the bytes of `demo_graph.jsonl`, every line validated."""
    lines = build()
    for line in lines:
        LINE.validate_python(line)
    return b"".join(orjson.dumps(line) + b"\n" for line in lines)


def main() -> None:
    data = encoded()
    OUT.write_bytes(data)
    print(f"wrote {len(data.splitlines())} lines to {OUT}")


if __name__ == "__main__":
    main()

"""Objects planted into a generated graph on top of its `--objects`: what the benchmarks and the relevance set need.

All of them live in the big scope (`projects:["big"]`), under three results of their own (`res-plant-1..3`,
reviewed 2025-03-31, 2025-05-31 and 2025-07-31), and are drawn from their own seeded random stream, so the rest
of the graph is the same with or without them.

* a big neighbourhood: entity `ent-hub-relations` with min(1,000, objects / 10) relations, and a small one
  (baseline): `ent-hub-small` with 8;
* a big story line: `sl-story-members` with min(10,000, objects / 10) member events `ev-story-NNNNN`;
* a big source: `src-big-text` (10,000,000 code points by default, in 4,096-code-point chunks), reference
  `sref-big-text`;
* identifier targets: event `evt-2f9c41d7`; reference `ref-8b21e6f0` of source `src-conv-5d3e71a2`, message
  `msg-c41f9a07`;
* decision stories (`STORIES`, for the relevance set): decision A (current + 3 snapshots), the revision event
  and its message, decision B, `B replaces A`, and 30 distractor events each that use the same words;
* an incident: event `evt-inc-4821` and its postmortem reference `ref-inc-4821-postmortem`;
* ops chatter: objects / 50 events `ev-ops-NNNNNN` mentioning `INC-dddd` and dates `2019-01-0d`.
"""

from __future__ import annotations

import random
import sqlite3
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Final

import orjson
from graph_text import EVENT_TYPES, RELATION_TYPES, Text

BIG_SCOPE: Final = 'projects:["big"]'
SALT: Final = 0x5EED_0001
"""Mixed into the graph seed: the plants' own random stream."""

PLANT_RESULTS: Final = (
    ("res-plant-1", "2025-03-31T18:00:00.000Z"),
    ("res-plant-2", "2025-05-31T18:00:00.000Z"),
    ("res-plant-3", "2025-07-31T18:00:00.000Z"),
)
HUB_ENTITY: Final = "ent-hub-relations"
SMALL_HUB_ENTITY: Final = "ent-hub-small"
SMALL_HUB_RELATIONS: Final = 8
HUB_STORY_LINE: Final = "sl-hub"
STORY_LINE: Final = "sl-story-members"
BIG_SOURCE: Final = "src-big-text"
BIG_REFERENCE: Final = "sref-big-text"
CHUNK: Final = 4096
"""Code points per stored source chunk (docs/interchange.md, 'For other writers')."""
IDENT_EVENT: Final = "evt-2f9c41d7"
IDENT_SOURCE: Final = "src-conv-5d3e71a2"
IDENT_CONVERSATION: Final = "conv-9e2d5b13"
IDENT_MESSAGE: Final = "msg-c41f9a07"
IDENT_REFERENCE: Final = "ref-8b21e6f0"
INCIDENT_EVENT: Final = "evt-inc-4821"
INCIDENT_REFERENCE: Final = "ref-inc-4821-postmortem"
SECTION: Final = (
    "Section {n}: the session cache on edge box {n} keeps writes below 3,000 per second. 会话缓存第{n}节 🚀𠀂 "
)

Row = tuple[object, ...]
Progress = Callable[[str], None]


@dataclass(frozen=True)
class Plan:
    """How much to plant for a graph of `objects` objects."""

    hub_relations: int
    story_members: int
    ops_events: int
    source_code_points: int

    @classmethod
    def for_size(cls, objects: int, source_code_points: int) -> Plan:
        tenth = max(10, objects // 10)
        return cls(min(1_000, tenth), min(10_000, tenth), objects // 50, source_code_points)


@dataclass(frozen=True)
class Story:
    """A small decision story: A decided, revised for a stated reason, B decided; its words are common elsewhere."""

    key: str
    topic: str
    a_label: str
    a_text: str
    revision_title: str
    revision_text: str
    b_label: str
    b_text: str
    b_name: str
    """What replaced A; the current projection of A says so, as a review would write it."""
    distractors: tuple[str, ...]


STORIES: Final = (
    Story(
        "queue",
        "Message queue backend / 消息队列选型",
        "Decision A: Kafka as the message queue backend / 消息队列用 Kafka",
        "Kafka, three brokers per region, as the queue backend of the sync worker; retention 7 days.",
        "Queue backend revised: Kafka → NATS / 消息队列方案调整",
        "Ops cannot run three Kafka brokers per region within the budget, so the queue backend moves to NATS "
        "JetStream. This replaces the Kafka decision for every region.",
        "Decision B: NATS JetStream replaces Kafka as the queue backend / 消息队列改用 NATS",
        "NATS JetStream, one cluster per region, as the queue backend; confirmed in the architecture review.",
        "NATS JetStream",
        (
            "Kafka consumer lag alert on the queue worker",
            "Kafka broker disk nearly full in staging",
            "queue backend dashboard shows Kafka topic growth",
            "消息队列 延迟 告警 from the Kafka exporter",
            "Kafka client upgrade for the batch export job",
        ),
    ),
    Story(
        "search",
        "Full-text search engine / 全文检索选型",
        "Decision A: Elasticsearch for full-text search / 全文检索用 Elasticsearch",
        "Elasticsearch, a three-node cluster, indexes every document for full-text search.",
        "Search engine revised: Elasticsearch → SQLite FTS5 / 全文检索方案调整",
        "The Elasticsearch cluster costs more than the whole storage budget and nobody owns it, so full-text "
        "search moves into SQLite FTS5. This replaces the Elasticsearch decision.",
        "Decision B: SQLite FTS5 replaces Elasticsearch for full-text search / 全文检索改用 FTS5",
        "SQLite FTS5 with the trigram tokenizer serves full-text search from the same database file.",
        "SQLite FTS5",
        (
            "Elasticsearch index rebuild took four hours",
            "Elasticsearch heap alert on the search cluster",
            "full-text search latency review for the api",
            "全文检索 性能 测试 against Elasticsearch",
            "Elasticsearch snapshot backup failed",
        ),
    ),
    Story(
        "deploy",
        "Deploy pipeline / 部署流水线",
        "Decision A: Jenkins runs the deploy pipeline / 部署流水线用 Jenkins",
        "Jenkins on the build host runs the deploy pipeline for every service.",
        "Deploy pipeline revised: Jenkins → GitHub Actions / 部署流水线方案调整",
        "The Jenkins server has no owner since the platform team left and plugin updates keep breaking releases, "
        "so the deploy pipeline moves to GitHub Actions. This replaces the Jenkins decision.",
        "Decision B: GitHub Actions replaces Jenkins for the deploy pipeline / 部署流水线改用 GitHub Actions",
        "GitHub Actions runs the deploy pipeline with one reusable workflow per service.",
        "GitHub Actions",
        (
            "Jenkins job for the nightly deploy failed",
            "Jenkins plugin update broke the release build",
            "deploy pipeline rollback drill",
            "部署流水线 回滚 测试 on Jenkins",
            "Jenkins agent out of disk",
        ),
    ),
    Story(
        "metrics",
        "Metrics storage / 指标存储选型",
        "Decision A: InfluxDB stores the service metrics / 指标存储用 InfluxDB",
        "InfluxDB with 90 days of retention stores every service metric.",
        "Metrics storage revised: InfluxDB → Prometheus / 指标存储方案调整",
        "InfluxDB compaction stalled the metric alert pipeline twice and its license changed, so metrics storage "
        "moves to Prometheus with remote write. This replaces the InfluxDB decision.",
        "Decision B: Prometheus replaces InfluxDB for metrics storage / 指标存储改用 Prometheus",
        "Prometheus with remote write to object storage keeps the service metrics.",
        "Prometheus",
        (
            "InfluxDB retention policy review",
            "InfluxDB write timeout alert",
            "metric dashboard migration plan",
            "指标存储 容量 评审 for InfluxDB",
            "InfluxDB backup restored in staging",
        ),
    ),
)
DISTRACTORS_PER_STORY: Final = 30


def big_text(code_points: int) -> str:
    """Deterministic, varied text of exactly `code_points` code points (every page differs)."""
    parts: list[str] = []
    size = 0
    n = 0
    while size < code_points:
        part = SECTION.format(n=n)
        parts.append(part)
        size += len(part)
        n += 1
    return "".join(parts)[:code_points]


class Planter:
    def __init__(self, conn: sqlite3.Connection, plan: Plan, seed: int, say: Progress) -> None:
        self.conn = conn
        self.plan = plan
        self.rng = random.Random(seed ^ SALT)
        self.text = Text(self.rng)
        self.say = say
        self.counts: dict[str, int] = {}

    def insert(self, table: str, columns: str, rows: Iterable[Row]) -> None:
        batch = list(rows)
        if not batch:
            return
        marks = ", ".join("?" * len(batch[0]))
        self.conn.executemany(f"INSERT INTO {table} ({columns}) VALUES ({marks})", batch)
        self.counts[table] = self.counts.get(table, 0) + len(batch)

    def result(self, n: int) -> tuple[str, str]:
        return PLANT_RESULTS[n % len(PLANT_RESULTS)]

    def ids(self, sql: str) -> list[str]:
        return [str(row[0]) for row in self.conn.execute(sql, (BIG_SCOPE,))]

    # --- rows -------------------------------------------------------------------------------------------------

    def event(
        self,
        event_id: str,
        n: int,
        title: str,
        description: str,
        *,
        story_line: str | None = None,
        event_type: str | None = None,
        at: str | None = None,
    ) -> Row:
        result_id, reviewed = self.result(n)
        start = at if at is not None else reviewed[:8] + f"{1 + n % 28:02d}T{n % 24:02d}:00:00.000Z"
        return (
            event_id,
            result_id,
            BIG_SCOPE,
            story_line,
            event_type or self.rng.choice(EVENT_TYPES),
            title,
            description,
            start,
            None,
            "minute",
            "message_time",
            reviewed,
            "automatic",
            "1",
        )

    def entity(self, entity_id: str, story_line: str, label: str, description: str, status: str | None) -> Row:
        return (
            entity_id,
            story_line,
            BIG_SCOPE,
            "decision",
            label,
            description,
            "confirmed",
            status,
            None,
            PLANT_RESULTS[-1][1],
            "2",
        )

    def relation(self, relation_id: str, n: int, ends: tuple[str, str, str, str], kind: str, reason: str) -> Row:
        result_id, reviewed = self.result(n)
        return (relation_id, result_id, BIG_SCOPE, *ends, kind, reason, "automatic", reviewed, "1")

    def reference(self, reference_id: str, n: int, source_id: str, locator: Mapping[str, object], text: str) -> Row:
        result_id, reviewed = self.result(n)
        return (
            reference_id,
            result_id,
            BIG_SCOPE,
            "conversation",
            source_id,
            "v1",
            orjson.dumps(locator).decode(),
            None,
            text,
            0,
            len(text),
            len(text),
            "available",
            reviewed,
            reviewed,
        )

    # --- what is planted ----------------------------------------------------------------------------------------

    def run(self) -> dict[str, int]:
        for result_id, reviewed in PLANT_RESULTS:
            self.insert(
                "results",
                "id, scope_key, review_generated_at, recorded_at, revision, coverage_json",
                [(result_id, BIG_SCOPE, reviewed, reviewed, f"{result_id}.1", None)],
            )
        entities = self.ids("SELECT id FROM entities WHERE scope_key = ? ORDER BY id")
        events = self.ids("SELECT id FROM events WHERE scope_key = ? ORDER BY id")
        self.hubs(entities, events)
        self.story_line()
        self.big_source()
        self.identifiers()
        for story in STORIES:
            self.decision_story(story)
        self.incident()
        self.ops_chatter()
        return self.counts

    def hubs(self, entities: list[str], events: list[str]) -> None:
        self.insert(
            "story_lines",
            "id, scope_key, topic, recorded_at, revision",
            [(HUB_STORY_LINE, BIG_SCOPE, "Shared gateway services / 共享网关", PLANT_RESULTS[0][1], "1")],
        )
        self.insert(
            "entities",
            "id, story_line_id, scope_key, entity_type, canonical_label, description, confirmation_state,"
            " decision_status, work_status, updated_at, revision",
            [
                self.entity(
                    HUB_ENTITY,
                    HUB_STORY_LINE,
                    "Session gateway hub / 会话网关",
                    "The shared session gateway every service depends on.",
                    None,
                ),
                self.entity(
                    SMALL_HUB_ENTITY,
                    HUB_STORY_LINE,
                    "Audit export job / 审计导出",
                    "A nightly audit export job with a handful of dependencies.",
                    None,
                ),
            ],
        )
        ends = [("entity", e) for e in entities] + [("event", e) for e in events]
        rows: list[Row] = []
        for hub, count, prefix in (
            (HUB_ENTITY, self.plan.hub_relations, "rel-hub"),
            (SMALL_HUB_ENTITY, SMALL_HUB_RELATIONS, "rel-small-hub"),
        ):
            for n in range(count):
                other_type, other_id = self.rng.choice(ends)
                pair = ("entity", hub, other_type, other_id)
                if n % 2:
                    pair = (other_type, other_id, "entity", hub)
                rows.append(
                    self.relation(
                        f"{prefix}-{n:05d}", n, pair, RELATION_TYPES[n % len(RELATION_TYPES)], self.text.words(4, 12)
                    )
                )
        self.insert(
            "relations",
            "id, result_id, scope_key, from_type, from_id, to_type, to_id, relation_type, reason,"
            " confirmation_state, recorded_at, revision",
            rows,
        )

    def story_line(self) -> None:
        self.insert(
            "story_lines",
            "id, scope_key, topic, recorded_at, revision",
            [(STORY_LINE, BIG_SCOPE, "Platform migration programme / 平台迁移", PLANT_RESULTS[0][1], "1")],
        )
        self.insert_events(
            self.event(f"ev-story-{n:05d}", n, self.text.words(3, 7), self.text.words(8, 22), story_line=STORY_LINE)
            for n in range(self.plan.story_members)
        )

    def insert_events(self, rows: Iterable[Row]) -> None:
        self.insert(
            "events",
            "id, result_id, scope_key, story_line_id, event_type, title, description, event_time_start,"
            " event_time_end, event_time_precision, event_time_basis, recorded_at, confirmation_state, revision",
            rows,
        )

    def insert_references(self, rows: Iterable[Row]) -> None:
        self.insert(
            "source_references",
            "id, result_id, scope_key, source_type, original_source_id, source_version, locator_json, title,"
            " fragment, fragment_start, fragment_end, source_length, availability, source_record_time, recorded_at",
            rows,
        )

    def insert_source(self, source_id: str, conversation: str | None, title: str, text: str) -> None:
        updated = PLANT_RESULTS[0][1]
        self.insert(
            "sources",
            "id, source_type, project_id, conversation_id, title, current_version, updated_at",
            [(source_id, "conversation", "big", conversation, title, "v1", updated)],
        )
        self.insert(
            "source_versions", "source_id, version, length, recorded_at", [(source_id, "v1", len(text), updated)]
        )
        self.insert(
            "source_chunks",
            "source_id, version, start, text",
            ((source_id, "v1", start, text[start : start + CHUNK]) for start in range(0, len(text), CHUNK)),
        )

    def big_source(self) -> None:
        text = big_text(self.plan.source_code_points)
        self.insert_source(BIG_SOURCE, None, "Big design document", text)
        locator = {"project_id": "big", "document_id": "doc-big-text", "chunk_id": "full-text"}
        row = list(self.reference(BIG_REFERENCE, 0, BIG_SOURCE, locator, text[100:600]))
        row[9:12] = [100, 600, len(text)]  # fragment_start, fragment_end, source_length
        self.insert_references([tuple(row)])

    def identifiers(self) -> None:
        message = "Restarted the queue worker after the deploy; the retry budget was exhausted overnight."
        self.insert_source(IDENT_SOURCE, IDENT_CONVERSATION, "#ops · queue worker", message)
        locator = {
            "project_id": "big",
            "conversation_id": IDENT_CONVERSATION,
            "message_id": IDENT_MESSAGE,
            "order": 7,
            "role": "user",
        }
        self.insert_references([self.reference(IDENT_REFERENCE, 0, IDENT_SOURCE, locator, message)])
        self.insert_events([self.event(IDENT_EVENT, 0, "Queue worker restarted after deploy", message)])
        self.insert(
            "object_sources",
            "object_type, object_id, source_reference_id, scope_key",
            [("event", IDENT_EVENT, IDENT_REFERENCE, BIG_SCOPE)],
        )

    def decision_story(self, story: Story) -> None:
        k = story.key
        line, a, b = f"sl-rel-{k}", f"ent-rel-{k}-a", f"ent-rel-{k}-b"
        # From the second review on, A's description notes the revision, as the demo's Decision A does.
        revised_a = f"{story.a_text} Revised on 2025-05-02: replaced by {story.b_name}."
        revision, reference, replaces = f"evt-rel-{k}-revision", f"ref-rel-{k}-revision", f"rel-rel-{k}-b-replaces-a"
        self.insert(
            "story_lines",
            "id, scope_key, topic, recorded_at, revision",
            [(line, BIG_SCOPE, story.topic, PLANT_RESULTS[0][1], "1")],
        )
        self.insert(
            "entities",
            "id, story_line_id, scope_key, entity_type, canonical_label, description, confirmation_state,"
            " decision_status, work_status, updated_at, revision",
            [
                self.entity(a, line, story.a_label, revised_a, "decided"),
                self.entity(b, line, story.b_label, story.b_text, "decided"),
            ],
        )
        # Decision A has three snapshots (one per plant result): an agent must still see the revision and B.
        snapshots: list[Row] = [
            (
                a,
                result_id,
                BIG_SCOPE,
                str(n + 1),
                story.a_label,
                story.a_text if n == 0 else revised_a,
                "confirmed",
                reviewed,
            )
            for n, (result_id, reviewed) in enumerate(PLANT_RESULTS)
        ]
        snapshots += [
            (b, result_id, BIG_SCOPE, str(n), story.b_label, story.b_text, "confirmed", reviewed)
            for n, (result_id, reviewed) in enumerate(PLANT_RESULTS[1:], start=1)
        ]
        self.insert(
            "entity_revisions",
            "entity_id, result_id, scope_key, revision, canonical_label, description, confirmation_state, recorded_at",
            snapshots,
        )
        message = {
            "project_id": "big",
            "conversation_id": f"conv-rel-{k}",
            "message_id": f"msg-rel-{k}-revision",
            "order": 40,
            "role": "user",
        }
        self.insert_references([self.reference(reference, 1, f"src-rel-{k}-revision", message, story.revision_text)])
        self.insert_events(
            [
                self.event(
                    f"evt-rel-{k}-a",
                    0,
                    story.a_label,
                    story.a_text,
                    story_line=line,
                    event_type="decision",
                    at="2025-03-10T09:00:00.000Z",
                ),
                self.event(
                    revision,
                    1,
                    story.revision_title,
                    story.revision_text,
                    story_line=line,
                    event_type="change",
                    at="2025-05-02T09:17:00.000Z",
                ),
                self.event(
                    f"evt-rel-{k}-b",
                    1,
                    story.b_label,
                    story.b_text,
                    story_line=line,
                    event_type="decision",
                    at="2025-05-03T15:00:00.000Z",
                ),
            ]
            + [
                self.event(
                    f"evt-rel-{k}-noise-{n:02d}",
                    n,
                    story.distractors[n % len(story.distractors)],
                    self.text.words(6, 14),
                )
                for n in range(DISTRACTORS_PER_STORY)
            ]
        )
        self.insert(
            "entity_changes",
            "entity_id, association_key, result_id, scope_key, event_id, change_type, description, entity_revision,"
            " applicable_from, applicable_to, confirmation_state, recorded_at",
            [
                (
                    a,
                    "revised",
                    PLANT_RESULTS[1][0],
                    BIG_SCOPE,
                    revision,
                    "revised",
                    story.revision_text,
                    "2",
                    None,
                    None,
                    "confirmed",
                    PLANT_RESULTS[1][1],
                )
            ],
        )
        self.insert(
            "relations",
            "id, result_id, scope_key, from_type, from_id, to_type, to_id, relation_type, reason,"
            " confirmation_state, recorded_at, revision",
            [self.relation(replaces, 1, ("entity", b, "entity", a), "replaces", story.revision_text)],
        )
        self.insert(
            "object_sources",
            "object_type, object_id, source_reference_id, scope_key",
            [("event", revision, reference, BIG_SCOPE), ("relation", replaces, reference, BIG_SCOPE)],
        )

    def incident(self) -> None:
        text = "INC-4821 postmortem: a retry storm from the queue worker took the sync api down on 2019-01-05."
        locator = {"project_id": "big", "document_id": "doc-postmortems", "chunk_id": "inc-4821"}
        self.insert_references([self.reference(INCIDENT_REFERENCE, 2, "src-postmortems", locator, text)])
        self.insert_events(
            [
                self.event(
                    INCIDENT_EVENT,
                    2,
                    "INC-4821: retry storm took the sync api down / 事故",
                    text,
                    event_type="issue",
                    at="2019-01-05T03:10:00.000Z",
                )
            ]
        )
        self.insert(
            "object_sources",
            "object_type, object_id, source_reference_id, scope_key",
            [("event", INCIDENT_EVENT, INCIDENT_REFERENCE, BIG_SCOPE)],
        )

    def ops_chatter(self) -> None:
        def rows() -> Iterable[Row]:
            for n in range(self.plan.ops_events):
                number = self.rng.randrange(1000, 10000)
                number = 4822 if number == 4821 else number
                title = f"INC-{number} {self.text.words(2, 5)}"
                description = f"{self.text.words(3, 8)} on 2019-01-0{1 + n % 9} {self.text.words(3, 8)}"
                yield self.event(f"ev-ops-{n:06d}", n, title, description)

        self.insert_events(rows())


def plant(conn: sqlite3.Connection, plan: Plan, seed: int, say: Progress) -> dict[str, int]:
    """Insert the planted objects in one transaction; returns rows per table."""
    conn.execute("BEGIN")
    counts = Planter(conn, plan, seed, say).run()
    conn.execute("COMMIT")
    say("  planted            " + ", ".join(f"{table} {n:,}" for table, n in counts.items()))
    return counts

"""The demo's stories and its experience (docs/demo.md, "Stories and experiences").

Atlas's session-cache work is a feature story with two threads: the Redis plan, concluded by the
May revision, and the move to SQLite WAL, still active. A cross story of the project pair links
what Atlas and Beacon decided about the shared edge boxes.

The experience "don't pick infrastructure ops cannot run on the edge boxes" formed from Atlas's
revision and from the joint release review that restated it for both apps; Beacon then applied it.
An experience belongs to the scope of the events that formed it, so it belongs to the pair
{atlas, beacon}: a caller granted only Atlas or only Beacon never sees it, nor the other
project's events it lists.
"""

from __future__ import annotations

from typing import Any

from demo.base import ATLAS, PAIR, RECORDED, Demo, event, message, when

FEATURE = "story-atlas-session-cache"


def stories_and_experiences(d: Demo) -> None:
    new_events(d)
    atlas_stories(d)
    pair_story(d)
    edge_box_experience(d)


def new_events(d: Demo) -> None:
    """Two events the experience needs: the pair's restated rule and Beacon's application of it."""
    d.source(
        "src-pair-edge-rule-msg",
        "conversation",
        project_id="atlas",
        conversation_id="conv-release-2026-7",
        title="#release-2026-7 · Tom Becker · 2026-06-26 16:00",
        updated_at="2026-06-26T16:00:00+08:00",
        versions=[
            (
                "v1",
                "2026-06-26T16:00:00+08:00",
                "Adding to the 2026.7 checklist: anything that runs on the edge boxes (the Atlas sync service and "
                "whatever Beacon puts next to it) uses only what ops already runs there: SQLite, plain files, the "
                "sync binary. Same lesson as the Redis revision in May. 边缘节点上只用运维已经在跑的东西。",
            )
        ],
    )
    d.source(
        "src-beacon-push-msg",
        "conversation",
        project_id="beacon",
        conversation_id="conv-beacon-sync",
        title="#beacon-sync · Liu Yang · 2026-06-29 10:00",
        updated_at="2026-06-29T10:00:00+08:00",
        versions=[
            (
                "v1",
                "2026-06-29T10:00:00+08:00",
                "Push for Beacon 4.3: I wanted a small MQTT broker on each edge box next to Atlas. Tom says ops "
                "cannot run another server there, same as Redis for Atlas, so push rides the sync API long-poll "
                "instead. 推送改走同步接口的长轮询，不在边缘节点上加 MQTT。",
            )
        ],
    )
    d.reference(
        "ref-pair-edge-rule",
        "res-pair-2026-06",
        "src-pair-edge-rule-msg",
        "v1",
        "anything that runs on the edge boxes (the Atlas sync service and whatever Beacon puts next to it) uses "
        "only what ops already runs there: SQLite, plain files, the sync binary.",
        locator=message("atlas", "conv-release-2026-7", "msg-rel-0031", 31),
        title="#release-2026-7 · Tom Becker · 2026-06-26 16:00",
        source_record_time="2026-06-26T16:00:00+08:00",
    )
    d.reference(
        "ref-beacon-push",
        "res-beacon-2026-06",
        "src-beacon-push-msg",
        "v1",
        "Tom says ops cannot run another server there, same as Redis for Atlas, so push rides the sync API "
        "long-poll instead.",
        locator=message("beacon", "conv-beacon-sync", "msg-bsync-0022", 22),
        title="#beacon-sync · Liu Yang · 2026-06-29 10:00",
        source_record_time="2026-06-29T10:00:00+08:00",
    )
    event(
        d,
        "evt-pair-edge-box-rule",
        "res-pair-2026-06",
        story_line_id="sl-pair-release",
        event_type="decision",
        title="Release checklist: only what ops already runs on the edge boxes / 边缘节点只用运维在跑的技术",
        description="Tom Becker adds to the 2026.7 checklist that everything running on the edge boxes, Atlas's "
        "sync service and anything Beacon adds next to it, uses only what ops already runs there. He cites the "
        "May revision of Atlas's session cache.",
        event_time=when("2026-06-26T16:00:00+08:00", "minute", "message_time"),
        confirmation_state="confirmed",
        revision="evt-pair-edge-box-rule@1",
        source_reference_ids=["ref-pair-edge-rule"],
    )
    event(
        d,
        "evt-beacon-push-relay",
        "res-beacon-2026-06",
        story_line_id="sl-beacon-sync",
        event_type="decision",
        title="Beacon push rides the sync API; no MQTT broker on the edge boxes / 推送不加 MQTT",
        description="Liu Yang drops the plan for an MQTT broker on each edge box because ops cannot run another "
        "server there. Push for Beacon 4.3 uses the sync API long-poll instead.",
        event_time=when("2026-06-29T10:00:00+08:00", "minute", "message_time"),
        revision="evt-beacon-push-relay@1",
        source_reference_ids=["ref-beacon-push"],
    )


def story(d: Demo, story_id: str, level: str, scope: dict[str, Any], **fields: Any) -> None:
    d.add("story", id=story_id, level=level, scope=scope, **fields)


def link(d: Demo, story_id: str, *event_ids: str, primary: bool) -> None:
    for event_id in event_ids:
        d.add("story_event", story_id=story_id, event_id=event_id, primary=primary)


def atlas_stories(d: Demo) -> None:
    story(
        d,
        FEATURE,
        "feature",
        ATLAS,
        name="Session cache / 会话缓存",
        description="Where the Atlas edge boxes keep user sessions: from the kickoff risk through Redis to SQLite WAL.",
        started_at="2026-02-01T10:00:00+08:00",
        ended_at="2026-06-20T16:45:00+08:00",
        # Mei Lin renamed the automatic "Redis 会话缓存" after the revision: a user edit.
        confirmation_state="user_edited",
        recorded_at=RECORDED["res-atlas-2026-07"],
        revision="story-atlas-session-cache@3",
    )
    story(
        d,
        "story-atlas-redis-plan",
        "thread",
        ATLAS,
        parent_story_id=FEATURE,
        name="Redis plan / Redis 方案",
        description="Redis as the session cache, from the March decision to the May revision that replaced it.",
        state="concluded",
        state_event_id="evt-revision-a-to-b",
        started_at="2026-03-10T11:20:00+08:00",
        ended_at="2026-05-02T09:17:00+08:00",
        recorded_at=RECORDED["res-atlas-2026-05"],
        revision="story-atlas-redis-plan@2",
    )
    story(
        d,
        "story-atlas-sqlite-wal",
        "thread",
        ATLAS,
        parent_story_id=FEATURE,
        name="Move to SQLite WAL / 迁移到 SQLite WAL",
        description="The load test, Decision B and what came after; the migration task ATL-212 is in progress.",
        # Its first event, the load test, is dated by day (2026-04-01 to 2026-04-14): the story starts that day.
        started_at="2026-04-01T00:00:00Z",
        started_at_precision="day",
        ended_at="2026-06-20T16:45:00+08:00",
        recorded_at=RECORDED["res-atlas-2026-07"],
        revision="story-atlas-sqlite-wal@2",
    )
    # Every event has at most one primary story; evt-retry-policy (the client's retries) has none.
    link(d, FEATURE, "evt-late-recorded-kickoff", "evt-unknown-time-2", primary=True)
    link(d, "story-atlas-redis-plan", "evt-decision-a", "evt-unknown-time-1", "evt-revision-a-to-b", primary=True)
    link(d, "story-atlas-sqlite-wal", "evt-load-test-window", "evt-decision-b", "evt-option-c", primary=True)


def pair_story(d: Demo) -> None:
    story(
        d,
        "story-pair-edge-stack",
        "cross",
        PAIR,
        name="What runs on the edge boxes / 边缘节点上跑什么",
        description="Atlas and Beacon share the customer-site edge boxes; their decisions about what may run there.",
        started_at="2026-05-02T09:17:00+08:00",
        ended_at="2026-06-29T10:00:00+08:00",
        recorded_at=RECORDED["res-pair-2026-06"],
    )
    # A cross story is never an event's primary story: these are related links, to events of Atlas, of the
    # pair and of Beacon, all within the pair's scope.
    link(
        d,
        "story-pair-edge-stack",
        "evt-revision-a-to-b",
        "evt-decision-b",
        "evt-pair-edge-box-rule",
        "evt-beacon-push-relay",
        primary=False,
    )


def edge_box_experience(d: Demo) -> None:
    d.add(
        "experience",
        id="exp-edge-box-infra",
        scope=PAIR,
        statement="Don't pick infrastructure ops cannot run on the edge boxes / 不要选运维在边缘节点上跑不了的基础设施",
        conditions="Anything deployed to the customer-site edge boxes: no on-call at the sites, little RAM, one SD "
        "card.",
        boundaries="Not the cloud side, where Redis stays until the migration is done. An embedded library inside "
        "the app (SQLite, LMDB) adds nothing for ops to run.",
        recorded_at=RECORDED["res-pair-2026-06"],
        revision="exp-edge-box-infra@1",
    )
    uses = [
        ("evt-revision-a-to-b", "formed", "Redis dropped for the session cache: ops cannot run it on the boxes."),
        ("evt-pair-edge-box-rule", "formed", "The release checklist states the rule for both apps."),
        ("evt-decision-b", "applied", "SQLite WAL runs inside the sync service: nothing new for ops to operate."),
        ("evt-beacon-push-relay", "applied", "No MQTT broker on the boxes; Beacon's push rides the sync API."),
    ]
    for event_id, role, note in uses:
        d.add("experience_event", experience_id="exp-edge-box-infra", event_id=event_id, role=role, note=note)

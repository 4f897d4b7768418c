"""The envoy's router: moves every outbox entry into its recipients' inboxes exactly once.

Shell layer: gathers (sleeve directory, outbox entries, journal), asks `routing.plan_entry`
what is left to do, and applies it through `mailbox` (local sleeves) or `remote` (sidecars on
other hosts). Each step is idempotent and the order makes every crash point safe:

1. deliver: an inbox takes a (from, id) only once, so a repeat is a no-op; a file-per-message
   entry that needs nothing else is archived in the same batch (the archive takes an id once),
   and when its outbox file is its inbox copy byte for byte, that file is set aside in the
   outbox and linked into the inbox instead of a new file (`_link_copies`);
2. journal `delivered` (a cache: losing it only means asking the inboxes again);
3. dead letters and bounces (dead letters named by id and code, bounces by a derived id);
4. archive the rest in the sender's workspace (by id, once), then journal `archived`;
5. remove from the outbox through `shared_file.rewrite`, which never drops what was written
   meanwhile; a block that comes back (an editor's stale save) is recognised by the journal
   and removed without a second delivery.

One pass routes every sender whose outbox changed, and is made durable in three steps for all
of them (`route_senders`).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from moss_files.foundation import fs
from moss_files.foundation.errors import MossError, error_body
from moss_files.foundation.ids import format_time, system_clock
from moss_files.foundation.loglevels import say
from needlecast import mailbox, remote, shared_file, signing
from needlecast.journal import Journal, archived_event, dead_event, delivered_event, merge_deliveries
from needlecast.mailbox import Mailbox
from needlecast.message import Message, message_to_dict
from needlecast.peers import Peer, read_token_file, wall_clock
from needlecast.routing import DeadNote, Directory, Entry, EntryPlan, Sleeve, archived_copy, bounce, plan_entry
from needlecast.sleeves import load_directory

Log = Callable[[str], None]
_T = TypeVar("_T")
# While more mail waits, a pass may leave its senders' archive tops unrotated up to this many
# times their limit (docs/formats.md, "Rotation").
ROTATION_PUT_OFF = 4
# While more mail waits, a pass of at least ARCHIVE_PUT_OFF_FROM linked deliveries may leave
# their archive copies (and so their removal from the outbox) to a later pass, up to this many
# messages a sender: the next deliveries do not wait behind a burst's archive files.
ARCHIVE_PUT_OFF = 2048
ARCHIVE_PUT_OFF_FROM = 8


@dataclass(slots=True)
class RouteReport:
    """What one routing pass did, summed over senders."""

    senders: int = 0
    delivered: int = 0  # (message, recipient) pairs newly delivered
    archived: int = 0
    removed: int = 0
    dead_letters: int = 0
    bounces: int = 0
    pending: int = 0  # entries left in outboxes (waiting for a recipient)
    unsettled: bool = False  # some outbox ended mid-write; look again shortly
    held: list[dict[str, Any]] = field(default_factory=list)
    problems: list[dict[str, Any]] = field(default_factory=list)

    def add(self, other: RouteReport) -> None:
        for name in ("senders", "delivered", "archived", "removed", "dead_letters", "bounces", "pending"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.unsettled = self.unsettled or other.unsettled
        self.held.extend(other.held)
        self.problems.extend(other.problems)


def report_to_dict(report: RouteReport) -> dict[str, Any]:
    """JSON shape of a routing pass."""
    return {
        "senders": report.senders,
        "delivered": report.delivered,
        "archived": report.archived,
        "removed": report.removed,
        "dead_letters": report.dead_letters,
        "bounces": report.bounces,
        "pending": report.pending,
        "unsettled": report.unsettled,
        "held": report.held,
        "problems": report.problems,
    }


@dataclass(slots=True)
class _Pass:
    """The working state of one routing pass over one sender's outbox."""

    sender: str
    box: Mailbox
    journal: Journal
    now: datetime
    stamp: str
    report: RouteReport
    plans: list[tuple[Entry, EntryPlan]] = field(default_factory=list)
    delivered: dict[str, set[str]] = field(default_factory=dict)  # key -> recipients holding it
    held: dict[str, list[str]] = field(default_factory=dict)  # key -> recipients not reachable now
    conflicts: dict[str, list[str]] = field(default_factory=dict)  # key -> inboxes with another message under that id
    events: list[dict[str, Any]] = field(default_factory=list)  # `delivered` facts not yet journaled
    archived: list[dict[str, Any]] = field(default_factory=list)  # `archived` facts of the pass's batch, not yet journaled
    batched: set[str] = field(default_factory=set)  # keys archived in the pass's batch
    unarchived: set[str] = field(default_factory=set)  # keys whose archive file the batch failed to write
    set_aside: dict[Path, str] = field(default_factory=dict)  # outbox files set aside, linked as a delivered copy: source -> name aside
    sleeve: Sleeve | None = None  # where `box` is, as the directory named it
    deferred: bool = False  # delivered and journaled; archiving and removal left to a later pass (`Router._owed`)
    owed: bool = False  # a deferred pass taken up again: only its archiving and removal remain


@dataclass(slots=True)
class _Saved:
    """What a sender's pass knew before the file-per-message deliveries were recorded, to go
    back to when their batch fails."""

    work: _Pass
    delivered: dict[str, set[str]]
    conflicts: dict[str, list[str]]
    events: int
    count: int

    @classmethod
    def of(cls, work: _Pass) -> _Saved:
        delivered = {key: set(names) for key, names in work.delivered.items()}
        return cls(work, delivered, {key: list(names) for key, names in work.conflicts.items()}, len(work.events), work.report.delivered)

    def restore(self) -> None:
        self.work.delivered, self.work.conflicts = self.delivered, self.conflicts
        del self.work.events[self.events :]
        self.work.report.delivered = self.count


def _done_by(journal: Journal) -> Callable[[Entry], bool]:
    """Whether an outbox entry needs nothing more than removal, by what `journal` records."""

    def done(entry: Entry) -> bool:
        record = journal.get(entry.key)
        return record is not None and record.digest == entry.digest and record.settled()

    return done


def _unwritable(exc: OSError) -> MossError:
    return MossError(f"cannot write: {exc.strerror or exc}", code="NOT_WRITABLE", path=exc.filename)


class Router:
    """Routes the outboxes of every local sleeve in an envoy's directory."""

    def __init__(
        self,
        root: Path,
        *,
        clock: Callable[[], datetime] = system_clock,
        environ: Mapping[str, str] | None = None,
        log: Log | None = None,
        http_timeout: float = remote.DEFAULT_TIMEOUT,
        peers: Mapping[str, Peer] | None = None,
        host_name: str | None = None,
        self_name: str | None = None,
        archive_top_files: int = mailbox.ARCHIVE_TOP_FILES,
        archive_segment_bytes: int = mailbox.ARCHIVE_SEGMENT_BYTES,
        more_waiting: Callable[[], bool] | None = None,
        writing: Callable[[], bool] | None = None,
    ) -> None:
        self.root = root.resolve()
        # Whether more mail waits to be routed (the sidecar's pending outboxes): while it does,
        # a pass leaves its senders' archive rotation to a later pass (`_rotate`), and, as while
        # a writer is at work in an outbox (`writing`, the sidecar's hint), a burst's archive
        # copies (`_defer`).
        self.more_waiting = more_waiting
        self.writing = writing
        # When the senders' archives rotate (docs/formats.md, "Rotation"); tests set them low.
        self.archive_top_files = archive_top_files
        self.archive_segment_bytes = archive_segment_bytes
        self.clock = clock
        self.environ = dict(environ or {})
        self.peers = dict(peers or {})
        self.host_name = host_name  # our name in the peers' tables: it signs our requests
        self.self_name = self_name
        self.log = log or (lambda text: None)
        self.http_timeout = http_timeout
        self._journals: dict[Path, Journal] = {}
        self._recovered: set[Path] = set()  # senders whose folders this process has checked
        # What each sender's file-per-message archive top holds, kept up to date by this router's
        # own changes and listed again when someone else changed the folder, or at a full pass.
        self._archive_tops: dict[Path, mailbox.ArchiveTop] = {}
        self._rotation_owed: set[Path] = set()  # senders whose rotation a busy pass put off
        # Passes whose deliveries are made and journaled but whose archive copies a busy pass put
        # off, by sender: their outbox files stay set aside (hidden from `read_outbox`, kept by
        # `recover_mailbox`) until a later pass archives and removes them (`route_senders`).
        self._owed: dict[Path, tuple[Sleeve, list[_Pass]]] = {}
        self.directory: Directory | None = None

    # ----------------------------------------------------------------- directory

    def refresh(self) -> Directory:
        """Re-read the sleeve directory. Raises InvalidDocument REGISTRY_INVALID."""
        peers = {name: peer.url for name, peer in self.peers.items()}
        self.directory = load_directory(self.root, self_name=self.self_name, peers=peers, host_name=self.host_name)
        return self.directory

    def senders(self) -> list[Sleeve]:
        """Local sleeves whose outboxes this router drains."""
        directory = self.directory or self.refresh()
        local = [s for s in directory.sleeves.values() if s.path is not None and s.problem is None and not s.remote]
        # The root's outbox is routed once: under this sidecar's own name when the root is a
        # lone sleeve (no other local sleeve), else as the envoy's.
        lone = not any(s.origin in ("child", "registry") for s in local)
        skip = "envoy" if lone and any(s.origin == "self" for s in local) else "self"
        return [s for s in local if s.origin != skip]

    # ----------------------------------------------------------------- passes

    def route_all(self) -> RouteReport:
        """One pass over every sender. Registry errors raise; per-sender failures are reported.

        Also re-checks every sender's folders for what killed writers left behind, and writes
        the archive copies busy passes put off.
        """
        self.refresh()
        self._recovered.clear()
        self._archive_tops.clear()
        return self.route_senders(self.senders(), settle_owed=True)

    def route_names(self, names: set[str]) -> RouteReport:
        """One pass over the named senders only (those whose outbox changed)."""
        directory = self.directory or self.refresh()
        chosen = [directory.get(name) for name in sorted(names)]
        return self.route_senders([s for s in chosen if s is not None and s.path is not None and s.problem is None and not s.remote])

    def owes(self) -> bool:
        """Whether a busy pass left archive copies to write (`route_owed` writes them)."""
        return bool(self._owed)

    def route_owed(self) -> RouteReport:
        """One pass that archives and removes what busy passes delivered (and routes whatever
        else those senders' outboxes hold)."""
        return self.route_senders([sleeve for sleeve, _works in self._owed.values()], settle_owed=True)

    def _busy(self) -> bool:
        return (self.more_waiting is not None and self.more_waiting()) or (self.writing is not None and self.writing())

    def _owed_count(self, root: Path) -> int:
        return sum(len(work.set_aside) for work in self._owed.get(root, (None, []))[1])

    def _journal(self, box: Mailbox) -> Journal:
        journal = self._journals.get(box.journal)
        if journal is None:
            journal = self._journals[box.journal] = Journal(box.journal)
        return journal.load()

    def _archive_top(self, box: Mailbox) -> mailbox.ArchiveTop:
        """What `box`'s archive top holds (listed only when changed by someone else)."""
        top = self._archive_tops[box.root] = mailbox.archive_top(box, self._archive_tops.get(box.root))
        return top

    def route_sender(self, sleeve: Sleeve) -> RouteReport:
        """Route one local sender's outbox; failures become problems in the report."""
        return self.route_senders([sleeve])

    def route_senders(self, sleeves: list[Sleeve], *, settle_owed: bool | None = None) -> RouteReport:
        """Route the outboxes of local senders in one pass; failures become problems.

        The senders' route locks are taken in path order and held for the pass. The pass is
        made durable in four steps for all its senders together, not a few per message: the new
        inbox files (then linked to their names), the new archive files (then linked), all
        their names (the folders), then, after every removal from the outboxes, the journals
        and the outbox folders; each step is one syncfs or fsyncs issued together
        (`shared_file.fsync_all`). A removal is only ever made after the files it routed are
        durable under their names.

        While more mail waits (`more_waiting`), a pass of linked deliveries may stop after the
        third step, leaving its archive copies and removals to a later pass (`_owed`): one that
        finds no more mail waiting (`settle_owed`, by default; `route_owed`), a full pass, or a
        sender's pass once it owes ARCHIVE_PUT_OFF messages.
        """
        total = RouteReport()
        directory = self.directory or self.refresh()
        if settle_owed is None:
            settle_owed = not self._busy()
        if settle_owed and self._owed:
            chosen = {str(sleeve.path): sleeve for sleeve in sleeves}
            for sleeve, _works in self._owed.values():
                chosen.setdefault(str(sleeve.path), sleeve)
            sleeves = list(chosen.values())
        works: list[_Pass] = []
        rotations: list[tuple[Mailbox, str, bool]] = []  # of senders with nothing to route
        with ExitStack() as stack:
            for sleeve in sorted(sleeves, key=lambda s: str(s.path)):
                report = RouteReport(senders=1)
                owed: list[_Pass] = []
                work = self._guarded(sleeve.name, report, partial(self._prepare, sleeve, report, stack, rotations, owed, settle_owed))
                works.extend(owed)  # before the sender's new work: the older deliveries are archived first
                if work is None:
                    total.add(report)
                else:
                    works.append(work)
            if works:
                self._deliver_all(works, directory)
            settle: list[Path] = []
            for work in works:
                self._guarded(work.sender, work.report, partial(self._finish, work, settle))
            self._rotate_after(works)
            if settle:
                try:
                    shared_file.make_durable(settle)
                except OSError as exc:
                    for work in works:
                        work.report.problems.append({"sleeve": work.sender, **error_body(_unwritable(exc))["error"]})
            for work in works:
                total.add(work.report)
            for box, sender, must in rotations:
                self._guarded(sender, total, partial(self._rotate, box, [], sender, must=must))
        return total

    def _guarded(self, sender: str, report: RouteReport, step: Callable[[], _T]) -> _T | None:
        """Run one sender's step; its failure becomes a problem in its report."""
        try:
            return step()
        except MossError as err:
            report.problems.append({"sleeve": sender, **error_body(err)["error"]})
            say(self.log, "warn", f"needlecast: {sender}: {err}")
        except OSError as exc:
            # A full disk or a read-only folder stops this sender's pass, not the router;
            # every step is idempotent, so the next pass resumes where this one stopped.
            failure = MossError(f"cannot write: {exc.strerror or exc}", code="NOT_WRITABLE", path=exc.filename)
            report.problems.append({"sleeve": sender, **error_body(failure)["error"]})
            say(self.log, "error", f"needlecast: {sender}: {failure}")
        return None

    def _prepare(
        self,
        sleeve: Sleeve,
        report: RouteReport,
        stack: ExitStack,
        rotations: list[tuple[Mailbox, str, bool]],
        owed: list[_Pass],
        settle_owed: bool,
    ) -> _Pass | None:
        """Take the sender's route lock (held until the pass ends), finish what a killed router
        left, read the outbox and plan each entry; None when there is nothing to route (adding
        to `rotations` a rotation the archive top is due: (box, sender, whether it is a must)).
        Adds to `owed` the sender's passes whose archiving this pass takes up again: with
        `settle_owed`, or once they hold ARCHIVE_PUT_OFF messages."""
        assert sleeve.path is not None
        box = Mailbox(sleeve.path)
        if not box.exists():
            self._owed.pop(box.root, None)  # gone, with whatever was set aside in it
            return None
        fs.ensure_ignored(box.state_dir)  # per-machine state: ignored by git even where .gitignore lacks the lines
        stack.enter_context(fs.locked(box.state_dir / "route"))
        journal = self._journal(box)
        sender = sleeve.name
        done = _done_by(journal)
        thorough = box.root not in self._recovered
        # This process's own passes owe the files it set aside: recovery leaves them alone.
        keep = {name for work in self._owed.get(box.root, (None, []))[1] for name in work.set_aside.values()}
        mailbox.recover_mailbox(box, done, sender, thorough=thorough, keep=keep)
        self._recovered.add(box.root)
        if box.root in self._owed and (settle_owed or self._owed_count(box.root) >= ARCHIVE_PUT_OFF):
            for work in self._owed.pop(box.root)[1]:
                # Its deliveries and their journal records are made: archive and remove.
                work.report, work.events, work.deferred, work.owed = RouteReport(), [], False, True
                owed.append(work)
        scan = mailbox.read_outbox(box, sender)
        report.unsettled = scan.unsettled
        if not scan.entries:
            if owed:
                return None  # rotated with the owed passes (`_rotate_after`)
            if (thorough or box.root in self._rotation_owed) and box.archive_dir.is_dir():
                # A pass killed after its last removal and before its rotation left nothing to
                # route, and so no pass to rotate: the first pass of a process, and each full
                # sweep, rotates the top all the same; so does the next pass after one that put
                # its rotation off (unless still busy). At the pass's end, after the other
                # senders' deliveries (`route_senders`).
                rotations.append((box, sender, thorough))
            return None
        now = self.clock()
        stamp = format_time(now)
        directory = self.directory or self.refresh()
        work = _Pass(sender, box, journal, now, stamp, report, sleeve=sleeve)
        work.plans = [(entry, plan_entry(entry, sender, directory, journal.get(entry.key), stamp)) for entry in scan.entries]
        work.delivered = {entry.key: set(plan.delivered) for entry, plan in work.plans}
        return work

    def _finish(self, work: _Pass, settle: list[Path]) -> None:
        """Steps 2-5 for one sender: journal the deliveries (and the archiving done with them),
        dead letters, archive the rest, removal. Adds to `settle` what is left to make durable."""
        events = merge_deliveries(work.events) + work.archived
        if events:
            work.journal.write(events, durable=False)
            settle.append(work.journal.path)
        if work.deferred:
            # Delivered, and the journal says so once `settle` is durable; the outbox files stay
            # set aside until a later pass archives them (`_prepare`).
            assert work.sleeve is not None
            self._owed.setdefault(work.box.root, (work.sleeve, []))[1].append(work)
            return
        self._dead_letters(work)
        finished = self._archive(work)
        removed = {entry.source for entry in finished}
        if any(source not in removed for source in work.set_aside):
            mailbox.put_back_aside(work.box, {source: name for source, name in work.set_aside.items() if source not in removed})
        if finished:
            mailbox.remove_from_outbox(work.box, work.sender, finished, _done_by(work.journal), settle=False, set_aside=work.set_aside)
            if any(entry.source != work.box.outbox_file for entry in finished):
                settle.append(work.box.outbox_dir)
            work.report.removed += len(finished)
        self._maybe_compact(work.journal, work.box, work.sender, work.now)

    def _rotate_after(self, works: list[_Pass]) -> None:
        """Rotate the archive top of each sender the pass routed, after all its removals. Every
        entry the pass read (of each of the sender's passes, and of those owed) stays at the top:
        one not removed yet may be archived there already, and the next pass looks for it
        there."""
        boxes: dict[Path, tuple[_Pass, list[Entry]]] = {}
        for work in works:
            if not work.deferred:
                boxes.setdefault(work.box.root, (work, []))
        for work in works:
            if work.box.root in boxes:
                boxes[work.box.root][1].extend(entry for entry, _plan in work.plans)
        for root, (work, pending) in boxes.items():
            pending.extend(entry for owed in self._owed.get(root, (None, []))[1] for entry, _plan in owed.plans)
            if work.box.archive_dir.is_dir():
                self._guarded(work.sender, work.report, partial(self._rotate, work.box, pending, work.sender))

    def _rotate(self, box: Mailbox, pending: list[Entry], sender: str, *, must: bool = False) -> None:
        """Rotate the sender's archive top (`mailbox.rotate_archive_folder`, keeping `pending`
        there), or, while more mail waits to be routed (`more_waiting`) and the top holds at
        most ROTATION_PUT_OFF times its limit, leave it to a later pass: a burst's deliveries
        come first, and the same moves are made once it lets up (in a pass with nothing to
        route too). A top that reaches that bound rotates, busy or not, so a steady stream
        still keeps it bounded. `must`: rotate, busy or not (the first pass of a process, a
        full sweep)."""
        top = self._archive_top(box)
        if not must and self.more_waiting is not None and len(top.names) <= ROTATION_PUT_OFF * self.archive_top_files and self.more_waiting():
            self._rotation_owed.add(box.root)
            return
        self._rotation_owed.discard(box.root)
        mailbox.rotate_archive_folder(box, pending, sender, top_files=self.archive_top_files, top=top)

    def _deliver_all(self, works: list[_Pass], directory: Directory) -> None:
        """Step 1 for every sender of the pass: one inbox write per file-layout recipient (each
        durable on its own) and remote post; the new files of file-per-message inboxes, then the
        archive files of every entry that needs nothing else (no dead letter, nobody held), each
        made durable together and linked, and then all their names. Each sender journals its
        part later (`_finish`)."""
        by_recipient: dict[str, list[tuple[_Pass, Entry, EntryPlan]]] = {}
        for work in works:
            if work.owed:
                continue  # delivered by the pass that owes its archiving
            for entry, plan in work.plans:
                for name in plan.deliver_to:
                    by_recipient.setdefault(name, []).append((work, entry, plan))

        def hold(name: str, items: list[tuple[_Pass, Entry, EntryPlan]], err: MossError) -> None:
            # The recipient cannot be reached now: its messages wait in the outboxes.
            counts: dict[int, int] = {}
            for work, entry, _plan in items:
                work.held.setdefault(entry.key, []).append(name)
                counts[id(work)] = counts.get(id(work), 0) + 1
            for work in {id(work): work for work, _entry, _plan in items}.values():
                work.report.held.append({"sleeve": work.sender, "recipient": name, "messages": counts[id(work)], **error_body(err)["error"]})

        def record(name: str, items: list[tuple[_Pass, Entry, EntryPlan]], results: list[str]) -> None:
            for (work, entry, _plan), result in zip(items, results, strict=True):
                if result == mailbox.CONFLICT:
                    work.conflicts.setdefault(entry.key, []).append(name)
                    continue
                work.delivered[entry.key].add(name)
                if result == mailbox.DELIVERED:
                    work.report.delivered += 1
                work.events.append(delivered_event(entry.key, entry.digest, [name], work.stamp))

        now = works[0].now
        # File-per-message inboxes are written together, in one batch with the archive files.
        together: list[tuple[str, list[tuple[_Pass, Entry, EntryPlan]], Mailbox]] = []
        for name, items in by_recipient.items():
            target = directory.get(name)
            copies = [plan.copy for _, _, plan in items if plan.copy is not None]
            try:
                if target is None or target.problem is not None:
                    raise target.problem if target is not None and target.problem else MossError(f"no sleeve {name}")
                box = self._local_box(target)
                if box is not None and box.inbox_dir.is_dir():
                    together.append((name, items, box))
                    continue
                results = self._deliver(target, copies, now)
            except MossError as err:
                hold(name, items, err)
                continue
            except OSError as exc:
                hold(name, items, _unwritable(exc))
                continue
            record(name, items, results)
        with ExitStack() as inboxes:  # the inboxes' locks, held until their files are in place
            planned: mailbox.FolderDelivery | None = None
            if together:
                batches = [(box, [plan.copy for _, _, plan in items if plan.copy is not None]) for _, items, box in together]
                try:
                    planned = mailbox.plan_folder_deliveries(batches, now, inboxes)
                except MossError as err:
                    for name, items, _box in together:
                        hold(name, items, err)
                except OSError as exc:
                    for name, items, _box in together:
                        hold(name, items, _unwritable(exc))
            saved = [_Saved.of(work) for work in works] if planned is not None else []
            if planned is not None:
                for (name, items, _box), results in zip(together, planned.results, strict=True):
                    record(name, items, results)
            inbox_groups = list(planned.groups) if planned is not None else []
            groups = list(inbox_groups)
            archiving: list[tuple[_Pass, list[tuple[Entry, Message]]]] = []
            for work in works:
                # An entry with a dead letter to write, or a clash in an inbox, is archived after
                # its dead letter, by `_finish`.
                later = {entry.key for entry, plan in work.plans if plan.dead} | set(work.conflicts)
                ready = [(entry, copy) for entry, copy in self._to_archive(work)[True] if entry.key not in later]
                if ready:
                    top = self._guarded(work.sender, work.report, partial(self._archive_top, work.box))
                    files = None if top is None else mailbox.archive_files(work.box, [copy for _, copy in ready], now, top)
                    if files is not None:
                        archiving.append((work, ready))
                        groups.append((work.box.archive_dir, files))
            if not groups:
                return
            try:
                # The inbox files first: a message reaches its inbox without waiting for its
                # archive copy, which follows in the same pass. An outbox file that is already
                # the inbox copy's bytes is linked there rather than written again.
                linked = self._link_copies(together, planned, archiving) if planned is not None else set()
                shared_file.create_in_folders(
                    [
                        (folder, [file for number, file in enumerate(files) if (group, number) not in linked])
                        for group, (folder, files) in enumerate(inbox_groups)
                    ],
                    settle=False,
                )
                if len(linked) >= ARCHIVE_PUT_OFF_FROM and self._busy():
                    kept = [(work, ready, files) for (work, ready), files in zip(archiving, groups[len(inbox_groups) :], strict=True) if not self._defer(work)]
                    archiving = [(work, ready) for work, ready, _files in kept]
                    groups = inbox_groups + [files for _work, _ready, files in kept]
                shared_file.create_in_folders(groups[len(inbox_groups) :], settle=False)
                # A linked file's bytes are made durable here too: its writer may not have (a
                # file written by hand), and its outbox name goes once this step is done.
                linked_files = [inbox_groups[group][0] / inbox_groups[group][1][number][0] for group, number in sorted(linked)]
                shared_file.make_durable([folder for folder, _files in groups] + linked_files)
            except (MossError, OSError) as exc:
                # Nothing was journaled: the next pass finds what is in place and does the rest.
                for work in works:
                    work.deferred = False
                    self._put_back(work)
                for work, _ready in archiving:
                    self._archive_tops.pop(work.box.root, None)  # some files may be in place
                failure = exc if isinstance(exc, MossError) else _unwritable(exc)
                for state in saved:
                    state.restore()
                for name, items, _box in together if planned is not None else ():
                    hold(name, items, failure)
                for work, ready in archiving:
                    work.unarchived.update(entry.key for entry, _copy in ready)
                    work.report.problems.append({"sleeve": work.sender, **error_body(failure)["error"]})
                return
        for (work, ready), (folder, files) in zip(archiving, groups[len(inbox_groups) :], strict=True):
            top = self._archive_tops[work.box.root]
            top.add(name for name, _data in files)
            top.sign(folder)
            work.report.archived += len(ready)
            work.archived.extend(archived_event(entry.key, entry.digest, work.stamp) for entry, _copy in ready)
            work.batched.update(entry.key for entry, _copy in ready)

    def _link_copies(
        self,
        together: list[tuple[str, list[tuple[_Pass, Entry, EntryPlan]], Mailbox]],
        planned: mailbox.FolderDelivery,
        archiving: list[tuple[_Pass, list[tuple[Entry, Message]]]],
    ) -> set[tuple[int, int]]:
        """Link into its first file-per-message inbox each outbox file that is archived in this
        batch and holds exactly the bytes of its inbox copy, set aside in its outbox first
        (`mailbox.set_aside_outbox_files`, which keeps only a file still as routed; `_finish`
        deletes it there). A file created costs an inode, a link only a name: this spares one
        new file per message. Return the (group, file) of `planned.groups` linked."""
        ready = {id(entry) for _work, items in archiving for entry, _copy in items}
        chosen: dict[int, tuple[_Pass, list[tuple[int, int, Entry]]]] = {}  # id(work) -> (work, [(group, file, entry)])
        taken: set[int] = set()
        for group, ((_name, items, _box), results) in enumerate(zip(together, planned.results, strict=True)):
            files = planned.groups[group][1]
            number = -1
            for (work, entry, _plan), result in zip(items, results, strict=True):
                if result != mailbox.DELIVERED:
                    continue
                number += 1  # a new file for each delivered message, in order
                if id(entry) in ready and id(entry) not in taken and entry.source.parent == work.box.outbox_dir and files[number][1] == entry.raw:
                    taken.add(id(entry))
                    chosen.setdefault(id(work), (work, []))[1].append((group, number, entry))
        linked: set[tuple[int, int]] = set()
        for work, picks in chosen.values():
            work.set_aside.update(mailbox.set_aside_outbox_files(work.box, [entry for _group, _number, entry in picks]))
            kept = [(group, number, entry) for group, number, entry in picks if entry.source in work.set_aside]
            links = [(work.set_aside[entry.source], planned.groups[group][0], planned.groups[group][1][number][0]) for group, number, entry in kept]
            for (group, number, _entry), done in zip(kept, shared_file.link_files(work.box.outbox_dir, links), strict=True):
                if done is not None:
                    linked.add((group, number))
        return linked

    def _defer(self, work: _Pass) -> bool:
        """Whether a busy pass leaves `work`'s archive copies to a later pass (and marks it so):
        only a sender's new pass whose every entry was delivered by a link from its outbox file
        set aside, needing nothing else (no dead letter, nobody held, no clash), within the
        sender's ARCHIVE_PUT_OFF."""
        if work.owed or work.held or work.conflicts or work.unarchived:
            return False
        if any(plan.dead or plan.remove_only or plan.held is not None or entry.source not in work.set_aside for entry, plan in work.plans):
            return False
        if self._owed_count(work.box.root) + len(work.set_aside) > ARCHIVE_PUT_OFF:
            return False
        work.deferred = True
        return True

    def _put_back(self, work: _Pass) -> None:
        """Put the sender's outbox files set aside for this pass back under their names."""
        if work.set_aside:
            aside, work.set_aside = work.set_aside, {}
            try:
                mailbox.put_back_aside(work.box, aside)
            except (MossError, OSError) as exc:
                # What stays aside, the next pass's recovery puts back (`recover_mailbox`).
                say(self.log, "warn", f"needlecast: {work.sender}: {exc}")

    def _dead_letters(self, work: _Pass) -> None:
        """Step 3: dead letters, each followed by a bounce into the sender's own inbox."""
        events: list[dict[str, Any]] = []
        bounces = []
        for entry, plan in work.plans:
            notes = list(plan.dead)
            if entry.key in work.conflicts:
                names = tuple(work.conflicts[entry.key])
                reason = f"{', '.join(names)} already hold a different message with id {entry.key!r} from {work.sender}"
                notes.append(DeadNote("DUPLICATE_MESSAGE_ID", reason, names))
            for note in notes:
                path = mailbox.dead_letter(work.box, entry, code=note.code, reason=note.reason, recipients=note.recipients, now=work.now)
                work.report.dead_letters += 1
                bounces.append(bounce(entry, work.sender, note, str(path.relative_to(work.box.root)), work.stamp))
                events.append(dead_event(entry.key, entry.digest, note.code, work.stamp))
        if bounces:
            results = mailbox.deliver(work.box, bounces, work.now)
            work.report.bounces += sum(1 for result in results if result == mailbox.DELIVERED)
        work.journal.write(events)

    def _to_archive(self, work: _Pass) -> dict[bool, list[tuple[Entry, Message]]]:
        """The archive copies still to write: of every entry that reached everyone it could
        reach and is not archived yet, by where it goes (True: a file each, False: archive.md)."""
        to_archive: dict[bool, list[tuple[Entry, Message]]] = {True: [], False: []}
        for entry, plan in work.plans:
            if plan.remove_only or plan.held is not None or plan.copy is None or work.held.get(entry.key):
                continue
            if entry.key in work.batched or entry.key in work.unarchived:
                continue
            record = work.journal.get(entry.key)
            reached = work.delivered[entry.key]
            # A broadcast with nobody else to hear it is still archived; a message that went
            # nowhere at all lives on as its dead letter instead.
            if (reached or not plan.undeliverable) and not (record is not None and record.archived):
                missing = plan.undeliverable + tuple(work.conflicts.get(entry.key, ()))
                copy = archived_copy(plan.copy, sorted(reached), missing, work.stamp)
                to_archive[entry.source != work.box.outbox_file].append((entry, copy))
        return to_archive

    def _archive(self, work: _Pass) -> list[Entry]:
        """Step 4: archive what reached everyone it could reach (and was not archived with the
        pass's deliveries); return the entries to remove."""
        finished: list[Entry] = []
        for entry, plan in work.plans:
            if plan.remove_only:
                finished.append(entry)
            elif plan.held is not None:
                assert entry.problem is not None
                work.report.problems.append({"sleeve": work.sender, **error_body(entry.problem)["error"]})
            elif work.held.get(entry.key) or entry.key in work.unarchived:
                work.report.pending += 1
            else:
                finished.append(entry)
        events: list[dict[str, Any]] = []
        for files, items in self._to_archive(work).items():
            if items:
                top = self._archive_top(work.box) if files else None
                mailbox.archive(work.box, [copy for _, copy in items], work.now, files=files, segment_bytes=self.archive_segment_bytes, top=top)
                work.report.archived += len(items)
                events.extend(archived_event(entry.key, entry.digest, work.stamp) for entry, _ in items)
        work.journal.write(events)
        return finished

    def _local_box(self, target: Sleeve) -> Mailbox | None:
        """The mailbox of a local sleeve, made first for the envoy's own workspace (None for a
        remote sleeve). Raises SLEEVE_UNAVAILABLE for a sleeve without one."""
        if target.remote:
            return None
        assert target.path is not None
        box = Mailbox(target.path)
        if not box.exists():
            # The envoy's own mailbox is created on first use; a sleeve's never is.
            if target.origin != "envoy":
                raise MossError(f"sleeve {target.name} has no mailbox", code="SLEEVE_UNAVAILABLE", path=box.dir)
            mailbox.init_mailbox(target.path)
        return box

    def _deliver(self, target: Sleeve, messages: list[Any], now: datetime) -> list[str]:
        box = self._local_box(target)
        if box is None:
            assert target.url is not None
            payload = [message_to_dict(m) for m in messages]
            if target.peer is not None:
                return remote.post_inbox(target.url, payload, token=None, signer=self._signer(target.peer), timeout=self.http_timeout)
            token = self.environ.get(target.token_env or "", None) if target.token_env else None
            if target.token_file:
                token = read_token_file(Path(target.token_file).expanduser())
            return remote.post_inbox(target.url, payload, token=token, timeout=self.http_timeout)
        return mailbox.deliver(box, messages, now)

    def _signer(self, peer_name: str) -> remote.Signer:
        """Signs requests to `peer_name` with the token this host shares with it."""
        peer = self.peers.get(peer_name)
        if peer is None or not self.host_name:
            raise MossError(f"no peer {peer_name!r} with a token is configured here", code="SLEEVE_UNAVAILABLE")
        host, token = self.host_name, peer.token

        def sign(method: str, target: str, body: bytes) -> dict[str, str]:
            return signing.signed_headers(host, token, method, target, body, now=wall_clock(), nonce=secrets.token_hex(16))

        return sign

    def _maybe_compact(self, journal: Journal, box: Mailbox, sender: str, now: datetime) -> None:
        if journal.oversized():
            owed = {entry.key for work in self._owed.get(box.root, (None, []))[1] for entry, _plan in work.plans}
            journal.compact({entry.key for entry in mailbox.read_outbox(box, sender).entries} | owed, now)

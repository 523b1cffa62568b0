/**
 * Which connection owns each live run of the listener (listener.ts): a run belongs to the connection
 * that announced it while that connection is open and no end came. Another connection may not
 * announce a run for the same host and path ('path-busy'), nor join its group without the group's
 * key; a writer whose machine rebooted (another boot id, and the live run's connection silent) ends
 * the old connection's runs as vanished. A released run that had not ended is announced as vanished,
 * with the verify command to run after the reboot.
 */
import { timingSafeEqual } from 'node:crypto'
import { performance } from 'node:perf_hooks'
import type { Machine } from '../../protocol/messages.js'
import type { AckStore } from '../../store/ack-store.js'
import { nativePort } from '../../native/index.js'
import { formatEndpoint } from '../../protocol/endpoint.js'
import { quotePath, shellQuote } from '../../base/shell-quote.js'
import type { Connection } from './connection.js'
import type { ListenerEvent } from './events.js'
import { printable } from '../../base/printable.js'
import { rebootSilenceMs, type ListenerOptions } from './listener-options.js'
import { RunIndex, pathKey } from './run-index.js'

export class RunOwners {
  /** Runs whose writer connection is open, by run id (including announcements still being stored). */
  private readonly owners = new Map<string, Connection>()
  /** The run ids of owners by host and path, and by host: an announcement or a hello looks at its own few, not at every live run. */
  private readonly ownedOnPath = new RunIndex()
  private readonly ownedOnHost = new RunIndex()
  /** Where each owned run writes (the store may forget a run whose announcement failed before it is released). */
  private readonly ownedWhere = new Map<string, { readonly host: string; readonly requestedPath: string }>()

  constructor(
    private readonly store: AckStore,
    private readonly options: ListenerOptions,
    /** Tells the listener's subscribers (Listener.emit). */
    private readonly emit: (event: ListenerEvent) => void,
    /** The listener is closing: writers cut off by the shutdown are not reported as vanished. */
    private readonly isClosing: () => boolean,
  ) {}

  /** The connection of the run's writer, if it is connected. */
  ownerOf(runId: string): Connection | undefined {
    return this.owners.get(runId)
  }

  /** The live run of another connection for this host and path, if any. */
  /** The run's writer is connected to this listener now. */
  isLive(runId: string): boolean {
    return this.owners.has(runId)
  }

  /** A live run on this path from another connection, not of the group being announced (whose other jobs may be live). */
  liveRunOn(host: string, requestedPath: string, except: Connection, groupId: string): string | undefined {
    for (const runId of this.ownedOnPath.of(pathKey(host, requestedPath))) {
      const owner = this.owners.get(runId)
      if (owner === undefined || owner === except) continue
      const info = this.store.runInfo(runId)
      if (
        info !== undefined &&
        !info.ended &&
        info.meta.host === host &&
        info.meta.requestedPath === requestedPath &&
        info.meta.groupId !== groupId
      )
        return runId
    }
    return undefined
  }

  /**
   * `write --jobs N` announces one group on N connections: a connection may join a group another live
   * connection announced only with that group's key and, without --token, from that connection's address.
   */
  mayJoinGroup(groupId: string, groupKey: string | undefined, peer: string): boolean {
    if (groupKey === undefined) return false
    for (const owner of new Set(this.owners.values())) {
      const key = owner.groupKeys.get(groupId)
      if (key === undefined || (this.options.token === undefined && owner.peer !== peer)) continue
      if (timingSafeEqual(Buffer.from(key), Buffer.from(groupKey))) return true // both 32 hex digits (groupKeySchema)
    }
    return false
  }

  /**
   * A new announcement for the path of a live run, from a writer whose machine has another boot id
   * than the live run's writer (both known): that machine rebooted, so the old writer is gone even if
   * its connection lingers (after a power cut TCP keepalive takes many minutes to notice). Its runs
   * are ended as vanished and its connection closed; true if so. Same or unknown boot ids: false; and
   * without --token only a writer from the live run's own address may take over.
   */
  takeOverFromRebooted(runId: string, newBootId: string | null | undefined, newPeer: string): boolean {
    const owner = this.owners.get(runId)
    const oldBootId = this.store.runInfo(runId)?.origin.writer?.bootId
    if (owner === undefined || !this.mayEndAsRebooted(owner, oldBootId, newBootId, newPeer)) return false
    this.endRebootedWriter(
      owner,
      `its writer's machine rebooted: a new run came from ${newPeer} with boot id ${newBootId}, the run's writer had ${oldBootId}`,
    )
    return true
  }

  /**
   * A client said which machine it runs on (hello's host and boot id): every live run of that host
   * whose writer had another boot id is over, whatever its connection still looks like (a machine that
   * loses power sends no FIN). So the rebooted machine's agent, or a plain verify there, finds its
   * runs ended as vanished and can report their verdicts. The same rules as a takeover by a new run.
   */
  endRunsOfEarlierBoot(machine: Machine, peer: string): string[] {
    const rebooted = new Map<Connection, string>()
    for (const runId of this.ownedOnHost.of(machine.host)) {
      const owner = this.owners.get(runId)
      if (owner === undefined) continue
      const info = this.store.runInfo(runId)
      if (info === undefined || info.ended || info.meta.host !== machine.host) continue
      const oldBootId = info.origin.writer?.bootId
      if (this.mayEndAsRebooted(owner, oldBootId, machine.bootId, peer)) rebooted.set(owner, oldBootId!)
    }
    const ended: string[] = []
    for (const [owner, oldBootId] of rebooted) {
      ended.push(
        ...this.endRebootedWriter(
          owner,
          `its writer's machine rebooted: ${machine.host} connected from ${peer} with boot id ${machine.bootId}, the run's writer had ${oldBootId}`,
        ),
      )
    }
    return ended
  }

  /**
   * Both boot ids known and different. A boot id is whatever the client says: only a holder of the
   * token, or the live run's own address, may end another connection's runs with it. Without a
   * token, a stranger must not stop a test.
   */
  private mayEndAsRebooted(
    owner: Connection,
    oldBootId: string | null | undefined,
    newBootId: string | null | undefined,
    newPeer: string,
  ): boolean {
    if (newBootId == null || oldBootId == null || newBootId === oldBootId) return false
    if (performance.now() - owner.lastDataPerfMs < (this.options.rebootSilenceMs ?? rebootSilenceMs)) return false // still writing: not the rebooted machine's
    return this.options.token !== undefined || newPeer === owner.peer
  }

  /** Ends every run of the rebooted writer's connection as vanished (detail says why) and closes it; the runs ended. */
  private endRebootedWriter(owner: Connection, rawDetail: string): string[] {
    // Host names and boot ids are whatever a client said: escaped before they reach a log line or the run's end.
    const detail = printable(rawDetail)
    const nowMs = Date.now()
    // Its runs, and announcements of it still being stored (owned, not in ownedRuns yet).
    const runIds = new Set(owner.ownedRuns)
    for (const [runId, o] of this.owners) if (o === owner) runIds.add(runId)
    const ended: string[] = []
    for (const runId of runIds) {
      const info = this.store.runInfo(runId)
      if (info !== undefined && !info.ended && this.store.isWritable(runId)) {
        this.store.endRun(runId, 'vanished', detail, nowMs)
        this.emitVanished(runId, owner, nowMs)
        ended.push(runId)
      }
      if (owner.ownedRuns.has(runId)) this.releaseRun(runId, owner)
      else this.disown(runId)
    }
    this.options.log?.(
      `plugcheck: run ${ended.join(', ') || [...runIds].join(', ')} from ${owner.peer} ended as vanished: ${detail}; closed its connection`,
    )
    owner.abort()
    return ended
  }

  claimRun(meta: { runId: string; host: string; requestedPath: string }, owner: Connection): void {
    this.owners.set(meta.runId, owner)
    this.ownedWhere.set(meta.runId, { host: meta.host, requestedPath: meta.requestedPath })
    this.ownedOnPath.add(pathKey(meta.host, meta.requestedPath), meta.runId)
    this.ownedOnHost.add(meta.host, meta.runId)
  }

  /** The run is no longer owned by a connection (the indexes follow owners). */
  private disown(runId: string): void {
    this.owners.delete(runId)
    const where = this.ownedWhere.get(runId)
    if (where === undefined) return
    this.ownedWhere.delete(runId)
    this.ownedOnPath.delete(pathKey(where.host, where.requestedPath), runId)
    this.ownedOnHost.delete(where.host, runId)
  }

  /** The run's writer is gone (or its announcement failed): it is no longer live. */
  releaseRun(runId: string, owner: Connection): void {
    if (this.owners.get(runId) === owner) this.disown(runId)
    const before = this.store.runInfo(runId)
    const nowMs = Date.now()
    this.store.release(runId, nowMs)
    // A run that was stored and had not ended: its writer vanished (a crash, a power cut, a lost network).
    if (before !== undefined && !before.ended && !before.creating && this.store.runInfo(runId)?.ended === true && !this.isClosing())
      this.emitVanished(runId, owner, nowMs)
  }

  /**
   * The event naming the verify command to run on the writer's machine after the reboot: the
   * listener's address as that writer reached it (its connection's local address), the path it wrote.
   */
  private emitVanished(runId: string, owner: Connection, atMs: number): void {
    const info = this.store.runInfo(runId)
    if (info === undefined) return
    const platform = info.origin.writer?.fingerprint?.os.platform
    const shell = platform === undefined ? nativePort().shell : platform === 'win32' ? 'windows' : 'posix'
    const server = formatEndpoint({ host: owner.localHost, port: owner.localPort })
    const token = this.options.token === undefined ? '' : " --token 'YOUR-TOKEN'"
    const verifyCommand = `plugcheck verify --server ${shellQuote(server, shell)} --file ${quotePath(info.meta.requestedPath, shell)}${token}`
    const { meta } = info
    this.emit({
      kind: 'vanished',
      runId,
      groupId: meta.groupId,
      host: meta.host,
      path: meta.requestedPath,
      acked: this.store.lastAckedSeq(runId),
      atMs,
      verifyCommand,
    })
  }
}

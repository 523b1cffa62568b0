/**
 * A lab "machine under test" for campaigns: a lab disk with `plugcheck agent` running on it, and a
 * power switch a campaign's cut command can reach.
 *
 * The listener (a real `plugcheck listen --campaign` child) runs its cut command, a shell script that
 * runs this file as a program: `node --import tsx test/lab/cut-and-reboot.ts SOCKET`. It asks the
 * machine on SOCKET (a unix socket served by the process that owns the lab) to cut the power: the
 * agent (the writer) is frozen with SIGSTOP at the moment nbdkit and nbdfuse are SIGKILLed (Lab.cut),
 * the disk "reboots" (the same image served again, the ext4 journal replayed on mount) and the next
 * agent starts on it, as a service would at boot. The program exits 0 once that is done, 1 with the
 * reason if it failed.
 *
 * A machine that loses power sends nothing more, not even a FIN: the frozen agent's connection stays
 * open at the listener, as a dead machine's does until TCP keepalive gives up on it many minutes
 * later (a SIGKILLed process would have its kernel close the connection at once, which no power cut
 * does). Frozen agents stay stopped until the machine is closed. Each agent runs as a new boot: in a
 * private mount namespace with a fresh boot id bind-mounted over /proc/sys/kernel/random/boot_id
 * (test/fixtures/rebooted.ts), so the listener and verify can tell the machine came back.
 *
 * The lab itself (its processes, mounts and loop devices) stays with the process that created it, so
 * its teardown always runs there, whatever the listener or its cut command did.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import fs from 'node:fs'
import net from 'node:net'
import path from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { Lab, type DiskMode } from './harness.js'
import { newBootIdFile, underBootId } from '../fixtures/rebooted.js'
import { rebootSilenceMs } from '../../src/server/listener.js'

const binPath = fileURLToPath(new URL('../../bin/plugcheck.js', import.meta.url))
const repoDir = fileURLToPath(new URL('../..', import.meta.url))
const helperPath = fileURLToPath(import.meta.url)
/** A cut and reboot takes ~1 s; the helper gives up after this. */
const cutTimeoutMs = 60_000

export interface MachineOptions {
  readonly mode: DiskMode
  readonly imageSizeMiB: number
  /** The listener, HOST:PORT. */
  readonly server: string
  /** Outside the cut: the control socket and the agents' logs. */
  readonly outsideDir: string
  /** Agent options after --server and --file (e.g. --method fdatasync,none). */
  readonly agentArgs: readonly string[]
}

export interface AgentExit {
  readonly generation: number
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
}

export class LabMachine {
  readonly controlSocket: string
  readonly file: string
  /** How each agent ended, in order (a cut agent ends by SIGKILL). */
  readonly agentExits: AgentExit[] = []
  cuts = 0
  /** Called when a cut request arrives, before the cut (n counts from 1): a test's hook into that moment. */
  beforeCut: ((n: number) => void) | null = null
  private agent: ChildProcess | null = null
  private agentExited: Promise<void> = Promise.resolve()
  /** Agents of earlier boots, stopped by the cut with their connections open; killed by close(). */
  private readonly frozen: Array<{ agent: ChildProcess; exited: Promise<void> }> = []
  private generation = 0
  private busy = false
  private closed = false

  private constructor(
    readonly lab: Lab,
    private readonly options: MachineOptions,
    private readonly server: net.Server,
  ) {
    this.controlSocket = server.address() as string
    this.file = path.join(lab.mountPoint, 'data')
  }

  static async start(options: MachineOptions): Promise<LabMachine> {
    const lab = await Lab.create({ mode: options.mode, imageSizeMiB: options.imageSizeMiB })
    const socketPath = path.join(options.outsideDir, `machine-${options.mode}.sock`)
    fs.rmSync(socketPath, { force: true })
    const server = net.createServer()
    try {
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject)
        server.listen(socketPath, () => resolve())
      })
    } catch (error) {
      await lab.teardown()
      throw error
    }
    const machine = new LabMachine(lab, options, server)
    server.on('connection', (socket) => machine.serve(socket))
    return machine
  }

  /** The first boot: starts the first agent (later ones start after each cut). */
  boot(): void {
    if (this.generation !== 0) throw new Error('the machine booted already')
    this.startAgent()
  }

  /** The shell script a listener runs as its --cut-command: this file as a program, aimed at this machine. */
  cutScript(): string {
    const q = (s: string): string => `'${s.replaceAll("'", `'\\''`)}'`
    return `#!/bin/sh\n# cut the lab disk's power, reboot it and start the next agent\ncd ${q(repoDir)} && exec ${q(process.execPath)} --import tsx ${q(helperPath)} ${q(this.controlSocket)}\n`
  }

  /** Agents started so far (one per boot). */
  get generations(): number {
    return this.generation
  }

  /** The log of agent generation n (1-based). */
  agentLog(generation: number): string {
    return path.join(this.options.outsideDir, `agent-${this.options.mode}-${generation}.log`)
  }

  /** Resolves when the current agent has exited (bounded by timeoutMs; false if it had not). */
  async agentDone(timeoutMs: number): Promise<boolean> {
    let timer: NodeJS.Timeout | undefined
    const timedOut = new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), timeoutMs)))
    const done = await Promise.race([this.agentExited.then(() => true), timedOut])
    clearTimeout(timer)
    return done
  }

  async close(): Promise<void> {
    this.closed = true
    await new Promise<void>((resolve) => this.server.close(() => resolve()))
    const agents = [...this.frozen, ...(this.agent === null ? [] : [{ agent: this.agent, exited: this.agentExited }])]
    // SIGKILL ends a stopped process too; their files on the old mounts go with them.
    for (const { agent } of agents) if (agent.exitCode === null && agent.signalCode === null) agent.kill('SIGKILL')
    await Promise.all(agents.map((a) => a.exited))
    await this.lab.teardown()
  }

  /** The power cut, the reboot and the next agent. */
  async cutAndReboot(): Promise<string> {
    if (this.closed) throw new Error('the machine is closed')
    if (this.busy) throw new Error('a cut is already under way')
    this.busy = true
    try {
      this.beforeCut?.(this.cuts + 1)
      const agent = this.agent
      // The power goes: the writer stops where it is and says nothing more; the disk dies with it.
      if (agent !== null && agent.exitCode === null && agent.signalCode === null) {
        agent.kill('SIGSTOP')
        this.frozen.push({ agent, exited: this.agentExited })
      }
      this.agent = null
      await this.lab.cut([])
      this.cuts++
      // The listener is another process: acks the writer sent just before the cut are still in its socket
      // buffer. And no machine reboots at once: the listener ends a silent writer's runs for a new boot
      // only after rebootSilenceMs (a writer still acking is never taken for a rebooted machine's).
      await new Promise((resolve) => setTimeout(resolve, rebootSilenceMs + 200))
      // The same disk comes back: its volatile cache (and its faults) are there again for the next cycle.
      await this.lab.reboot({ sameDisk: true })
      this.startAgent()
      return `cut ${this.cuts}: agent ${agent?.pid ?? '(none)'} frozen with its connection open, nbdkit and nbdfuse killed; the disk rebooted; agent ${this.generation} started with a new boot id`
    } finally {
      this.busy = false
    }
  }

  private startAgent(): void {
    this.generation++
    const generation = this.generation
    const log = fs.openSync(this.agentLog(generation), 'a')
    try {
      // A new boot: a boot id of its own (and the mount namespace that holds it).
      const bootId = newBootIdFile(this.options.outsideDir, `${this.options.mode}-${generation}`)
      const [command, args] = underBootId(bootId.path, process.execPath, [binPath, 'agent', '--server', this.options.server, '--file', this.file, ...this.options.agentArgs])
      const agent = spawn(command, args, { stdio: ['ignore', log, log] })
      this.agent = agent
      this.agentExited = new Promise<void>((resolve) => {
        agent.on('exit', (code, signal) => {
          this.agentExits.push({ generation, code, signal })
          resolve()
        })
        agent.on('error', () => resolve())
      })
    } finally {
      fs.closeSync(log)
    }
  }

  private serve(socket: net.Socket): void {
    let request = ''
    socket.setEncoding('utf8')
    socket.on('error', () => undefined)
    socket.on('data', (chunk: string) => {
      request += chunk
      if (!request.includes('\n')) return
      if (request.trim() !== 'cut') {
        socket.end(`error unknown request ${JSON.stringify(request.trim().slice(0, 40))}\n`)
        return
      }
      this.cutAndReboot().then(
        (said) => socket.end(`ok ${said}\n`),
        (error: unknown) => socket.end(`error ${error instanceof Error ? error.message : String(error)}\n`),
      )
    })
  }
}

/** The cut command's side: ask the machine on socketPath for a cut; exit 0 when it is done. */
async function requestCut(socketPath: string): Promise<number> {
  const answer = await new Promise<string>((resolve, reject) => {
    const socket = net.connect(socketPath)
    let text = ''
    const timer = setTimeout(() => {
      socket.destroy()
      reject(new Error(`no answer from ${socketPath} within ${cutTimeoutMs / 1000} s`))
    }, cutTimeoutMs)
    socket.setEncoding('utf8')
    socket.on('connect', () => socket.write('cut\n'))
    socket.on('data', (chunk: string) => (text += chunk))
    socket.on('error', (error) => {
      clearTimeout(timer)
      reject(error)
    })
    socket.on('close', () => {
      clearTimeout(timer)
      resolve(text.trim())
    })
  })
  process.stdout.write(`${answer}\n`)
  return answer.startsWith('ok ') ? 0 : 1
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const socketPath = process.argv[2]
  if (socketPath === undefined) {
    process.stderr.write('usage: node --import tsx test/lab/cut-and-reboot.ts SOCKET\n')
    process.exitCode = 2
  } else {
    process.exitCode = await requestCut(socketPath).catch((error: unknown) => {
      process.stderr.write(`cut failed: ${error instanceof Error ? error.message : String(error)}\n`)
      return 1
    })
  }
}

/** `plugcheck listen`: its flags and its run (the listener, and a campaign when --campaign names one). */
import { resolve } from 'node:path'
import { defaultPort } from '../../protocol/default-port.js'
import { type CliCommand, flagSchemas } from './command.js'

export const listenCliCommand: CliCommand = {
  name: 'listen',
  describe: 'run on a second machine that keeps power: store acknowledged seqs durably',
  options: (y) =>
    y
      .option('port', { type: 'number', default: defaultPort, describe: 'TCP port (0 picks a free one)' })
      .option('host', { type: 'string', default: '0.0.0.0', describe: 'address to listen on' })
      .option('dir', { type: 'string', default: './plugcheck-data', describe: 'where runs and acks are stored' })
      .option('token', { type: 'string', describe: 'shared secret writers and verifiers must present' })
      .option('max-connections', { type: 'number', default: 1024, describe: 'connections served at once; more are told so and closed' })
      .option('max-pending-hellos', {
        type: 'number',
        default: 1024,
        describe: 'connections waiting to say hello; beyond, the oldest is closed',
      })
      .option('max-runs', {
        type: 'number',
        default: 100_000,
        describe: 'runs on record in all; beyond, new runs are refused (prune ended ones: runs --prune, --retain)',
      })
      .option('max-runs-per-peer', { type: 'number', default: 10_000, describe: 'runs on record per peer address (IPv6: per /64)' })
      .option('max-store-bytes', {
        type: 'string',
        default: 'none',
        describe: 'bytes of runs on record in all (e.g. 20GiB, or none); live runs keep recording past it',
      })
      .option('max-store-bytes-per-peer', {
        type: 'string',
        default: 'none',
        describe: 'bytes of runs on record per peer address (e.g. 2GiB, or none)',
      })
      .option('reserve', {
        type: 'string',
        describe: 'free space of --dir under which new runs are refused, a size or a % (default: 1GiB or 5%, the smaller)',
      })
      .option('retain', { type: 'string', describe: 'prune ended runs older than this (30d, 12h, 90m, 45s) as the listener runs' })
      .option('events', { type: 'string', describe: 'also append every event as a JSON line to this file' })
      .option('campaign', {
        type: 'string',
        describe: 'run a power-cut campaign of this name (resumed if the directory holds it); needs --cut-command and --cut-after',
      })
      .option('cycles', { type: 'number', default: undefined, describe: 'campaign: cycles to run (default 10)' })
      .option('cut-command', {
        type: 'string',
        describe: 'campaign (required with --campaign): the command that cuts the power of the machine under test',
      })
      .option('cut-after', {
        type: 'string',
        describe: 'campaign (required with --campaign): MIN-MAX seconds after the writer is steady to cut (30-90, 30s-2m)',
      })
      .option('reboot-timeout', { type: 'string', describe: 'campaign: seconds (or 10m) to wait for the agent after a cut (default 600)' })
      .option('seed', { type: 'number', describe: 'campaign: seed of the cut moments (default: random, logged)' }),
  async run(args, io) {
    const a = (await flagSchemas()).validate('listen', args)
    const { runListen } = await import('../../server/listen/listen.js')
    return runListen(
      {
        host: a.host,
        port: a.port,
        dir: a.dir,
        maxConnections: a.maxConnections,
        maxPendingHandshakes: a.maxPendingHellos,
        quotas: {
          maxRuns: a.maxRuns,
          maxRunsPerPeer: a.maxRunsPerPeer,
          maxStoreBytes: a.maxStoreBytes,
          maxStoreBytesPerPeer: a.maxStoreBytesPerPeer,
        },
        ...(a.reserve === undefined ? {} : { reserve: a.reserve }),
        ...(a.retain === undefined ? {} : { retainMs: a.retain }),
        ...(a.token === undefined ? {} : { token: a.token }),
        ...(a.events === undefined ? {} : { eventsFile: resolve(a.events) }),
        ...(a.campaign === undefined
          ? {}
          : {
              campaign: {
                name: a.campaign,
                cycles: a.cycles ?? 10,
                cutCommand: a.cutCommand!,
                cutAfterS: a.cutAfter!,
                rebootTimeoutS: a.rebootTimeout ?? 600,
                ...(a.seed === undefined ? {} : { seed: a.seed }),
              },
            }),
      },
      io,
    )
  },
}

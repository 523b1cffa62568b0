/** What each data file's superblock says, read once per verify however many checks ask. */
import type { StoredRun } from '../../protocol/messages.js'
import { readSuperblock } from './data-file-read.js'

export class Superblocks {
  private readonly readings = new Map<string, ReturnType<typeof readSuperblock>>()
  of(run: StoredRun): ReturnType<typeof readSuperblock> {
    return this.at(run.meta.path)
  }
  readonly at = (path: string): ReturnType<typeof readSuperblock> => {
    let reading = this.readings.get(path)
    if (reading === undefined) {
      reading = readSuperblock(path)
      this.readings.set(path, reading)
    }
    return reading
  }
}

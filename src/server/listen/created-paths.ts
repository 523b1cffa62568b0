/**
 * What a listener's start creates on disk, so that a start that fails for nothing (its port taken)
 * leaves nothing behind: the --dir it made (with the parents it made), or in a --dir that existed the
 * entries it added there (runs/, journal/, the lock file). Nothing that existed before is removed.
 *
 * Assumption: the removal runs only after the start held the directory's lock (the failure is the
 * bind's, after the store opened), so no other listener was storing anything in what it removes.
 */
import { lstat, readdir, rm } from 'node:fs/promises'
import { dirname, join } from 'node:path'

export interface CreatedPaths {
  /** Removes what did not exist when notePaths looked; best effort (a failure leaves it in place). */
  removeCreated(): Promise<void>
}

async function exists(path: string): Promise<boolean> {
  try {
    await lstat(path)
    return true
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return false
    throw error
  }
}

/** Looks at dir (an absolute path) before the store is opened in it. */
export async function notePaths(dir: string): Promise<CreatedPaths> {
  try {
    if (await exists(dir)) {
      const before = new Set(await readdir(dir))
      return {
        async removeCreated() {
          const after = await readdir(dir).catch(() => [])
          for (const name of after.filter((entry) => !before.has(entry))) await rm(join(dir, name), { recursive: true, force: true })
        },
      }
    }
    // The topmost directory of dir that is missing: the start makes it and everything under it.
    let top = dir
    while (dirname(top) !== top && !(await exists(dirname(top)))) top = dirname(top)
    return {
      async removeCreated() {
        await rm(top, { recursive: true, force: true })
      },
    }
  } catch {
    // Unreadable (EACCES): the start will say why it cannot use dir; nothing here is removed then.
    return { removeCreated: async () => undefined }
  }
}

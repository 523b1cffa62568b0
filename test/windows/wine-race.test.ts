/**
 * scripts/wine.ts starts node.exe again only when Wine's own client lost the race with an exiting
 * wineserver (node.exe never ran); every other failure is the test's result, never retried.
 */
import t from 'tap'
import { lostWineServerRace } from '../../scripts/wine.js'

const race = { code: 1, stdout: '', stderr: 'wine client error:0: recvmsg: Connection reset by peer\n', timedOut: false }

t.test('a reset Wine client before any output is a lost race', async (t) => {
  t.equal(lostWineServerRace(race), true)
})

t.test('an exit 1 with nothing written at all is a lost race (node.exe never ran: plugcheck never fails silently)', async (t) => {
  t.equal(lostWineServerRace({ code: 1, stdout: '', stderr: '', timedOut: false }), true)
  t.equal(lostWineServerRace({ code: 2, stdout: '', stderr: '', timedOut: false }), false, "another code is the program's own")
  t.equal(lostWineServerRace({ code: 1, stdout: '', stderr: 'plugcheck: FAIL\n', timedOut: false }), false, 'a message: it ran')
})

t.test('a program that ran, exited 0, timed out or failed on its own is never started again', async (t) => {
  t.equal(lostWineServerRace({ ...race, stdout: 'plugcheck <command> [options]\n' }), false)
  t.equal(lostWineServerRace({ ...race, code: 0 }), false)
  t.equal(lostWineServerRace({ ...race, code: null, timedOut: true }), false)
  t.equal(lostWineServerRace({ ...race, stderr: 'Error: ENOENT: no such file or directory\n' }), false)
  t.equal(lostWineServerRace({ ...race, code: 3, stderr: 'plugcheck: wine client error: is not a Wine line\n' }), false)
})

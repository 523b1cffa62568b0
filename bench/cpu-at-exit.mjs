// Preloaded by bench/startup.ts (`node --import`): writes the process's CPU milliseconds (user +
// system, start-up included) to the file named by PLUGCHECK_CPU_FILE when it exits. CPU time is what
// start-up costs the machine; wall time on a shared, busy machine is mostly waiting for a core.
import { writeFileSync } from 'node:fs'

process.on('exit', () => {
  const { user, system } = process.cpuUsage()
  writeFileSync(process.env.PLUGCHECK_CPU_FILE, `${(user + system) / 1000}\n`)
})

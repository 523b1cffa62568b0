// biome-ignore-all lint/performance/useDomNodeTextContent: Playwright's Locator.innerText(), the text a reader sees, not the DOM property
/**
 * The HTML report in a real headless browser: Debian's chromium driven by playwright-core. The file
 * is opened from disk; the timelines must render (SVG lanes, ack lines, the cut line, lost ranges, all
 * of non-zero size), with no console error and no request of any kind beyond the file itself. Strings
 * from disk planted with markup stay text. A screenshot is kept in test-artifacts/report.png.
 * Without chromium the test fails, naming the package to install (.ci/run installs it).
 */
import t from 'tap'
import { existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { runInProcess } from '../../fixtures/cli.js'
import { campaignFileText, type CampaignFile } from '../../../src/store/campaign-file.js'
import { craftListenerDir, otherDevice, threeCycles } from '../../fixtures/report.js'

const chromiumPath = '/usr/bin/chromium'
const artifacts = fileURLToPath(new URL('../../../test-artifacts/', import.meta.url))

t.test('the HTML report renders its timelines in chromium', async (t) => {
  if (!existsSync(chromiumPath))
    return void t.fail(`${chromiumPath} is missing\nhint: apt-get install -y --no-install-recommends chromium (.ci/run does)`)
  const dir = t.testdir()
  // A host name and a cut command with markup: if either were not escaped, an element would load a resource or run.
  await craftListenerDir(dir, [{ ...threeCycles, host: 'box-a<img src="http://192.0.2.1/x.png">' }, otherDevice])
  const campaignPath = join(dir, 'campaigns', 'ssd-a.json')
  // Rewritten as the listener writes it, its checksum over the new command.
  const { xxh64: _checksum, ...campaign } = JSON.parse(readFileSync(campaignPath, 'utf8')) as CampaignFile & { xxh64: string }
  writeFileSync(
    campaignPath,
    campaignFileText({ ...campaign, cutCommand: `curl 'http://pdu/off?x=1&y=2' </dev/null "<script>document.title='pwned'</script>"` }),
  )
  const htmlPath = join(dir, 'report.html')
  const result = await runInProcess(['report', '--dir', dir, '--html', htmlPath])
  t.equal(result.code, 0, result.stderr)
  const html = readFileSync(htmlPath, 'utf8')
  t.notMatch(html, /<script|<img|<link|@import|url\(/i, 'no script, image, stylesheet link or url() in the file')
  t.match(html, /&lt;script&gt;document\.title=&#39;pwned&#39;&lt;\/script&gt;/, 'the cut command is shown as text')
  const sizeBytes = statSync(htmlPath).size
  t.ok(sizeBytes < 200_000, `a 5-cycle report is small (${sizeBytes} bytes)`)

  const { chromium } = await import('playwright-core')
  const browser = await chromium.launch({ executablePath: chromiumPath, args: ['--no-sandbox'], headless: true })
  t.teardown(() => browser.close())
  const page = await browser.newPage({ viewport: { width: 1100, height: 900 } })
  const consoleErrors: string[] = []
  const requests: string[] = []
  page.on('console', (m) => {
    if (m.type() === 'error') consoleErrors.push(m.text())
  })
  page.on('pageerror', (e) => consoleErrors.push(e.message))
  page.on('request', (r) => requests.push(r.url()))
  const url = pathToFileURL(htmlPath).href
  await page.goto(url, { waitUntil: 'load' })

  t.equal(await page.title(), 'plugcheck report: hdd-b, ssd-a', 'the title names the campaigns, and no script changed it')
  t.equal(await page.locator('figure.timeline svg').count(), 5, 'one timeline per cycle (3 + 2)')
  const svg = await page.locator('#cycle-ssd-a-2 svg').boundingBox()
  t.ok(svg !== null && svg.width > 500 && svg.height > 100, `cycle 2's timeline has a size (${JSON.stringify(svg)})`)
  t.equal(await page.locator('#cycle-ssd-a-2 svg polyline.acks').count(), 3, 'an ack line per method')
  for (const selector of ['polyline.acks', 'line.cut', 'rect.lost']) {
    const box = await page.locator(`#cycle-ssd-a-2 svg ${selector}`).first().boundingBox()
    t.ok(box !== null && (box.width > 0 || box.height > 0) && box.height > 0, `${selector} rendered (${JSON.stringify(box)})`)
  }
  t.equal(await page.locator('#cycle-ssd-a-2 svg rect.lost').count(), 3, "cycle 2's lost ranges: two of fsync, one of the control")
  t.equal(await page.locator('#cycle-ssd-a-3 svg rect.lost').count(), 1, 'cycle 3: the control lost nothing, only fsync')
  t.equal(await page.locator('#cycle-ssd-a-1 svg line.cut').count(), 1, 'one cut line')
  // The cut is after every ack of the cycle: its line is right of every lane's lost range.
  const cutBox = (await page.locator('#cycle-ssd-a-2 svg line.cut').boundingBox())!
  const lostBoxes = await page.locator('#cycle-ssd-a-2 svg rect.lost').evaluateAll((els) => els.map((e) => e.getBoundingClientRect().right))
  t.ok(
    lostBoxes.every((right) => right <= cutBox.x + 1),
    'lost ranges lie before the cut',
  )
  t.match(await page.locator('table.summary').innerText(), /2\/3 cuts noticed \(67%\)/, 'the summary table shows the detection rate')
  t.match(
    await page.locator('#campaign-ssd-a table.cycles').innerText(),
    /cycle 3: the control \(none\) lost nothing/,
    'the unnoticed cut is flagged',
  )
  t.match(await page.locator('body').innerText(), /box-a<img src="http:\/\/192\.0\.2\.1\/x\.png">/, 'the hostile host name is text')
  t.equal(await page.locator('img, script').count(), 0, 'no element came from the strings on disk')

  mkdirSync(artifacts, { recursive: true })
  const screenshot = join(artifacts, 'report.png')
  await page.screenshot({ path: screenshot, fullPage: true })
  t.ok(statSync(screenshot).size > 10_000, `screenshot saved: ${screenshot}`)

  t.same(consoleErrors, [], 'no console errors')
  t.same(requests, [url], 'no request but the file itself')
})

/**
 * <dir>/catalog.msgpack as plain values, for the tests that craft catalogs: read it, change what the
 * test needs, and seal it again, so its checksum holds whatever it says (a catalog only the listener
 * could have written, or one written by an older one).
 */
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { Packr } from 'msgpackr'
import { seal, unseal } from '../../src/server/sealed-file.js'

/** A catalog's header or one of its entries, as unpacked. */
export type CatalogValue = Record<string, unknown>

/** Header and entries as single maps (format 1's entries; every format's header). */
const mapPackr = new Packr({ useRecords: false, mapsAsObjects: true })

/** Entries in slices packed as records (format 2). */
function recordPackr(): Packr {
  return new Packr({ useRecords: true, mapsAsObjects: true })
}

/** The catalog's header and entries as written (format 2: slices of entries packed as records). */
export function readCatalogValues(dir: string): { header: CatalogValue; entries: CatalogValue[] } {
  const path = join(dir, 'catalog.msgpack')
  const file = unseal('catalog', readFileSync(path))
  if (file.kind !== 'sealed') throw new Error(`${path} is not a sealed catalog`)
  const [header, ...slices] = recordPackr().unpackMultiple(file.body) as [CatalogValue, ...CatalogValue[][]]
  if (header.version !== 2) throw new Error(`${path} is of format ${String(header.version)}`)
  return { header, entries: slices.flat() }
}

/** A catalog of these values, sealed: its checksum holds, whatever they say. Format 1: entries one by one, as maps. */
export function writeCatalogValues(dir: string, header: CatalogValue, entries: CatalogValue[], version: 1 | 2): void {
  const body =
    version === 1
      ? [{ ...header, version, runs: entries.length }, ...entries].map((value) => mapPackr.pack(value))
      : [mapPackr.pack({ ...header, version, runs: entries.length }), recordPackr().pack(entries)]
  writeFileSync(join(dir, 'catalog.msgpack'), seal('catalog', Buffer.concat(body)))
}

/** The catalog's values changed by craft (in place), sealed again as format 2; the header's run count follows the entries. */
export function recraftCatalog(dir: string, craft: (entries: CatalogValue[], header: CatalogValue) => void): void {
  const { header, entries } = readCatalogValues(dir)
  craft(entries, header)
  writeCatalogValues(dir, header, entries, 2)
}

/** The entry of runId (the test crafted it, so it is there). */
export function entryOf(entries: CatalogValue[], runId: string): CatalogValue {
  const entry = entries.find((e) => e.id === runId)
  if (entry === undefined) throw new Error(`the catalog has no entry for run ${runId}`)
  return entry
}

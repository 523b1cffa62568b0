/**
 * How a writer places its records: append (the file grows, then wraps), overwrite (random slots in
 * place), or files (each record its own small file in a directory, made durable the way careful
 * programs make a file: files-layout.ts). Apart from format.ts so the command line's help can name
 * them without loading the codecs.
 */
export const patterns = ['append', 'overwrite', 'files'] as const
export type Pattern = (typeof patterns)[number]

/** How a files run publishes a record file under its final name: rename(2), or link(2) then unlink(2) of the temporary name. */
export const publishWays = ['rename', 'link'] as const
export type PublishWay = (typeof publishWays)[number]

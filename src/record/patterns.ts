/**
 * How a writer places its records: append (the file grows, then wraps) or overwrite (random slots in
 * place). Apart from format.ts so the command line's help can name them without loading the codecs.
 */
export const patterns = ['append', 'overwrite'] as const
export type Pattern = (typeof patterns)[number]

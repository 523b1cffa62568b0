/** The listener's TCP port. Apart from messages.ts so the command line's help can show it without loading zod. */
export const defaultPort = 5400

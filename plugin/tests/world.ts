// What the plugin's tests stand on: the engine's nouns answered from memory beneath the plugin,
// and `process.run` answered by a binary the test scripts (or replays). Every request the
// plugin sends is recorded with its argv and timeout.

import { mock } from 'claude-code/testing'
import type { MockClock } from 'claude-code/testing'
import type { On, SessionMessage } from 'claude-code'

export const SID = 'session-under-test'
export const NOW = 1_800_000_000_000
export const SUMMARY: SessionMessage = { role: 'user', text: 'Summary: the built-in compaction ran.', toolUses: [] }

export type Sent = { argv: readonly string[]; request: Record<string, any>; timeoutMs: number | undefined }
export type Raw = { exitCode?: number; stdout?: string; stderr?: string }
/** The binary's reply: an answer body (exit 0, as JSON), a raw process result, or a throw. */
export type Reply = Raw | Record<string, unknown> | Error
export type Binary = (hook: string, request: Record<string, any>, stdin: string) => Reply | undefined

export type World = {
  /** The session's id (`SID` unless a test names its own). */
  sid: string
  sent: Sent[]
  store: Map<string, unknown>
  /** Set: the engine refuses a compaction with this error (as in a headless session). */
  refuseCompact?: string
  /** What Claude Code's own compaction was asked to do. */
  builtin: { trigger: string; instructions?: string }[]
  logs: string[]
  toasts: string[]
  tokens: number
  window: number
  /** What `$.session.model()` answers. */
  model: string
  rateLimits: number
  messages: SessionMessage[]
  clock: MockClock
  binary: Binary
}

export const ok = (body: Record<string, unknown>): Record<string, unknown> => ({ protocol: 1, ok: true, ...body })

const isRaw = (r: Reply): r is Raw => !(r instanceof Error) && ('stdout' in r || 'exitCode' in r || 'stderr' in r)

export function world(on: On, init: Partial<Omit<World, 'clock'>> = {}): World {
  const w: World = {
    sid: SID, sent: [], store: new Map(), builtin: [], logs: [], toasts: [], tokens: 0, window: 200_000, model: 'claude-fable-5-1', rateLimits: 0, messages: [],
    binary: () => undefined, ...init, clock: mock.clock(on, { now: NOW }),
  }
  on('store.get', (_$, e) => ({ value: w.store.get(e.key) }))
  on('store.set', (_$, e) => { w.store.set(e.key, e.value); return { value: undefined } })
  on('store.delete', (_$, e) => { w.store.delete(e.key); return { value: undefined } })
  on('store.keys', () => ({ value: [...w.store.keys()] }))
  mock.env(on, {})
  on('session.id', () => ({ value: w.sid }))
  on('session.cwd', () => ({ value: '/work/project' }))
  on('session.model', () => ({ value: w.model }))
  on('session.messages', () => ({ value: w.messages }))
  on('session.usage', () => ({ value: { startedAt: NOW, context: { tokens: w.tokens, window: w.window, percent: Math.round((100 * w.tokens) / w.window) }, rateLimits: Array.from({ length: w.rateLimits }, () => ({})) } }) as never)
  on('process.run', (_$, e) => {
    const stdin = e.init?.stdin ?? ''
    const request = stdin === '' ? {} : (JSON.parse(stdin) as Record<string, any>)
    w.sent.push({ argv: e.argv, request, timeoutMs: e.init?.timeoutMs })
    const r = w.binary(e.argv[2] ?? '', request, stdin)
    if (r === undefined) return { value: { exitCode: 2, stdout: '', stderr: `no reply scripted for ${e.argv[2]}`, isStdoutTruncated: false, isStderrTruncated: false } }
    if (r instanceof Error) throw r
    const raw: Raw = isRaw(r) ? r : { stdout: JSON.stringify(r) }
    return { value: { exitCode: raw.exitCode ?? 0, stdout: raw.stdout ?? '', stderr: raw.stderr ?? '', isStdoutTruncated: false, isStderrTruncated: false } }
  })
  on('session.compact', (_$, e) => {
    if (w.refuseCompact !== undefined) throw new Error(w.refuseCompact)
    w.builtin.push({ trigger: e.trigger, ...(e.instructions !== undefined ? { instructions: e.instructions } : {}) })
    return { messages: [SUMMARY] }
  })
  on('ui.log', (_$, e) => { w.logs.push(String((e as { text?: unknown }).text)); return { value: undefined } as never })
  on('ui.toast', (_$, e) => { w.toasts.push(String((e as { text?: unknown }).text)); return { value: undefined } as never })
  on('command.register', () => ({ value: undefined }) as never)
  on('session.start', (_$, e) => ({ cwd: (e as { cwd?: string }).cwd ?? '/work/project' }) as never)
  on('turn.start', (_$, e) => ({ turnId: e.turnId }))
  on('turn.complete', () => ({ text: '' }))
  on('tool.call', () => ({ result: 'ran' }) as never)
  on('skill.prompt', (_$, e) => ({ text: e.text }) as never)
  return w
}

/** Three engine messages as `session.compact` hands them: handles, and stored records. */
export function transcript(): SessionMessage[] {
  return [
    { role: 'user', text: 'List the files.', toolUses: [], handle: 'h0' },
    { role: 'assistant', text: '', handle: 'h1', toolUses: [{ tool_use_id: 'toolu_1', tool: 'Bash', input: { command: 'ls' }, text: 'a\nb', result: { stdout: 'x'.repeat(500) } }] },
    { role: 'user', text: '', handle: 'h2', toolUses: [], toolResults: [{ tool_use_id: 'toolu_1', text: 'a\nb', isError: false, result: { stdout: 'y' } }] },
  ]
}

export const TURN_DONE = { answer: 'done', durationMs: 5, isAborted: false, turnId: 'turn-1', reason: 'answer' as const }

export const sentTo = (w: World, hook: string): Sent[] => w.sent.filter((s) => s.argv[2] === hook)

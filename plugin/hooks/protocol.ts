// The plugin's half of `factrail hook` protocol v1 (docs/protocol.md in the factrail
// repository). Nothing here touches the engine: the functions take what they need as plain
// values or callbacks, so the hooks module can hand them closures over `$` and tests can hand
// them anything. No policy lives here either: requests carry the options untouched, and an
// answer is only checked for shape. Whatever cannot be checked is a failure, and a failure
// always means Claude Code's own behaviour.

import type { PluginOptions, ProcessRunInit, ProcessRunResult, SessionMessage } from 'claude-code'

export const PROTOCOL = 1

export type Hook = 'compact' | 'turn' | 'taint' | 'status'

export type Run = (argv: readonly string[], init: ProcessRunInit) => Promise<ProcessRunResult>

export type Body = Record<string, unknown>

export type Reply = { ok: true; body: Body } | { ok: false; why: string }

/** Per-hook process timeouts (ms): the three local checks are quick; a tool call or a turn
 *  must never wait long on them. `compact` gets the judge's deadline plus a grace. */
export const TIMEOUTS: Readonly<Record<Exclude<Hook, 'compact'>, number>> = {
  taint: 5_000,
  turn: 10_000,
  status: 10_000,
}
export const JUDGE_DEADLINE_MS = 15_000
export const COMPACT_GRACE_MS = 10_000
const LONGEST_RUN_MS = 600_000
const QUOTED_CHARS = 200

/** `taint:` and `baseline:` records older than this (or with no readable `at`) are pruned at
 *  session start: the plugin's own store hygiene, since the binary sees one session at a time. */
export const RECORD_TTL_MS = 30 * 24 * 3600 * 1000

export const taintKey = (session: string): string => `taint:${session}`
export const baselineKey = (session: string): string => `baseline:${session}`

const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v)

/** The last non-blank line of a text, cut to a log line's length. */
export function lastLine(text: string): string {
  const lines = text.split('\n').map((l) => l.trim()).filter((l) => l !== '')
  const line = lines[lines.length - 1] ?? ''
  return line.length > QUOTED_CHARS ? `${line.slice(0, QUOTED_CHARS)}…` : line
}

function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error)
}

/** The executable the hooks run: the `binary` option, else `factrail` on PATH. */
export function binaryOf(options: PluginOptions): string {
  const v = options['binary']
  return typeof v === 'string' && v.trim() !== '' ? v.trim() : 'factrail'
}

/** `compact`'s process timeout: the judge's deadline as the binary reads it, plus the grace. */
export function compactTimeoutMs(options: PluginOptions): number {
  const v = options['compactionTimeoutMs']
  const n = typeof v === 'number' ? v : typeof v === 'string' && v.trim() !== '' ? Number(v) : NaN
  const deadline = Number.isFinite(n) && n > 0 ? Math.ceil(n) : JUDGE_DEADLINE_MS
  return Math.min(deadline + COMPACT_GRACE_MS, LONGEST_RUN_MS)
}

/** Runs `<binary> hook <hook>` once with `request` on stdin; checks the envelope. Never throws. */
export async function ask(run: Run, binary: string, hook: Hook, request: Body, timeoutMs: number): Promise<Reply> {
  let out: ProcessRunResult
  try {
    out = await run([binary, 'hook', hook], { stdin: JSON.stringify(request), timeoutMs })
  } catch (error) {
    return { ok: false, why: `could not run ${binary}: ${lastLine(errorText(error))}` }
  }
  if (out.exitCode !== 0) {
    const said = lastLine(out.stderr)
    return { ok: false, why: `${binary} exited ${out.exitCode}${said ? `: ${said}` : ''}` }
  }
  let parsed: unknown
  try {
    parsed = JSON.parse(out.stdout)
  } catch (error) {
    return { ok: false, why: `unparsable answer (${lastLine(errorText(error))})` }
  }
  if (!isRecord(parsed)) return { ok: false, why: 'the answer is not a JSON object' }
  if (parsed['protocol'] !== PROTOCOL) {
    return { ok: false, why: `protocol mismatch (the answer speaks ${JSON.stringify(parsed['protocol'] ?? null)}, this plugin ${PROTOCOL})` }
  }
  if (parsed['ok'] !== true) {
    const error = typeof parsed['error'] === 'string' ? lastLine(parsed['error']) : 'no error given'
    return { ok: false, why: `refused: ${error}` }
  }
  return { ok: true, body: parsed }
}

// -- requests ----------------------------------------------------------------------------

export type ToolRef = { tool: string; skill: string | null }

/** The skill a `Skill` call loads (`input.skill`, else `input.name`), else null. */
export function skillOf(tool: string, input: unknown): string | null {
  if (tool !== 'Skill' || !isRecord(input)) return null
  const v = input['skill'] ?? input['name']
  return typeof v === 'string' ? v : null
}

/** The calls of a transcript as the fence reads them. */
export function toolRefs(messages: readonly SessionMessage[]): ToolRef[] {
  return messages.flatMap((m) => m.toolUses.map((u) => ({ tool: String(u.tool), skill: skillOf(String(u.tool), u.input) })))
}

/** A message as the protocol sends it: the stored records (`result`, `meta`) left out, the
 *  engine's `handle` kept so a `{ keep: i }` maps back to it. */
export function wireMessage(m: SessionMessage): Body {
  const out: Body = {
    role: m.role,
    text: m.text,
    toolUses: m.toolUses.map((u) => {
      const use: Body = { tool_use_id: u.tool_use_id, tool: u.tool, input: u.input }
      if (typeof u.text === 'string') use['text'] = u.text
      if (u.isError === true) use['isError'] = true
      return use
    }),
  }
  if (m.toolResults) {
    out['toolResults'] = m.toolResults.map((r) => ({ tool_use_id: r.tool_use_id, text: r.text, isError: r.isError === true }))
  }
  if (m.handle !== undefined) out['handle'] = m.handle
  return out
}

export type Usage = { tokens: number | null; percent: number | null; window: number | null }

export function usageOf(context: { tokens?: number; percent?: number; window?: number } | undefined): Usage {
  return { tokens: context?.tokens ?? null, percent: context?.percent ?? null, window: context?.window ?? null }
}

/** A stored value as a request carries it: absent is null. */
export const held = (v: unknown): unknown => (v === undefined ? null : v)

// -- answers -----------------------------------------------------------------------------

/** A store write the answer asks for: a present, non-null value; else undefined (no write). */
export const writeOf = (v: unknown): unknown => (v === null ? undefined : v)

function storeOf(body: Body): Record<string, unknown> {
  const s = body['store']
  return isRecord(s) ? s : {}
}

const lineOf = (v: unknown): string | null => (typeof v === 'string' && v !== '' ? v : null)

export type Plan =
  | { action: 'install'; messages: SessionMessage[] }
  | { action: 'builtin'; instructions?: string }
  | { action: 'skip'; reason: string }

export type Compaction = {
  plan: Plan
  reason: string | null
  log: string | null
  toast: boolean
  writes: { taint: unknown; last: unknown; baseline: unknown }
}

/** One built message, checked field by field and rebuilt from what was checked. */
function built(raw: Record<string, unknown>, at: number): SessionMessage | string {
  if (raw['handle'] !== undefined) return `messages[${at}] is built but carries a handle`
  const role = raw['role']
  if (role !== 'user' && role !== 'assistant') return `messages[${at}].role is neither user nor assistant`
  const text = raw['text']
  if (typeof text !== 'string') return `messages[${at}].text is not a string`
  const uses = raw['toolUses']
  if (!Array.isArray(uses)) return `messages[${at}].toolUses is not an array`
  const toolUses: SessionMessage['toolUses'] = []
  for (const [j, u] of uses.entries()) {
    if (!isRecord(u) || typeof u['tool_use_id'] !== 'string' || typeof u['tool'] !== 'string' || !isRecord(u['input'])) {
      return `messages[${at}].toolUses[${j}] needs a string tool_use_id and tool and an object input`
    }
    if (u['text'] !== undefined && typeof u['text'] !== 'string') return `messages[${at}].toolUses[${j}].text is not a string`
    if (u['isError'] !== undefined && typeof u['isError'] !== 'boolean') return `messages[${at}].toolUses[${j}].isError is not a boolean`
    toolUses.push({
      tool_use_id: u['tool_use_id'],
      tool: u['tool'],
      input: u['input'],
      ...(typeof u['text'] === 'string' ? { text: u['text'] } : {}),
      ...(u['isError'] === true ? { isError: true as const } : {}),
    })
  }
  const message: SessionMessage = { role, text, toolUses }
  const results = raw['toolResults']
  if (results !== undefined) {
    if (!Array.isArray(results)) return `messages[${at}].toolResults is not an array`
    const toolResults: NonNullable<SessionMessage['toolResults']> = []
    for (const [j, r] of results.entries()) {
      if (!isRecord(r) || typeof r['tool_use_id'] !== 'string' || typeof r['text'] !== 'string') {
        return `messages[${at}].toolResults[${j}] needs a string tool_use_id and text`
      }
      if (r['isError'] !== undefined && typeof r['isError'] !== 'boolean') return `messages[${at}].toolResults[${j}].isError is not a boolean`
      toolResults.push({ tool_use_id: r['tool_use_id'], text: r['text'], isError: r['isError'] === true })
    }
    if (toolResults.length > 0) message.toolResults = toolResults
  }
  return message
}

/** An `install` list mapped onto the engine's own messages, checked whole before anything is
 *  returned: one bad entry rejects the list, since half a list would corrupt the session. */
export function installList(input: readonly SessionMessage[], raw: unknown): { ok: true; messages: SessionMessage[] } | { ok: false; why: string } {
  if (!Array.isArray(raw)) return { ok: false, why: 'install without a message list' }
  if (raw.length === 0) return { ok: false, why: 'install with an empty message list' }
  const kept = new Set<number>()
  const out: SessionMessage[] = []
  for (const [at, entry] of raw.entries()) {
    if (!isRecord(entry)) return { ok: false, why: `messages[${at}] is not an object` }
    if ('keep' in entry) {
      const i = entry['keep']
      if (typeof i !== 'number' || !Number.isInteger(i) || i < 0 || i >= input.length) {
        return { ok: false, why: `messages[${at}].keep ${JSON.stringify(i)} is no index into ${input.length} messages` }
      }
      if (kept.has(i)) return { ok: false, why: `messages[${at}].keep ${i} is used twice` }
      kept.add(i)
      out.push(input[i] as SessionMessage)
      continue
    }
    const message = built(entry, at)
    if (typeof message === 'string') return { ok: false, why: message }
    out.push(message)
  }
  return { ok: true, messages: out }
}

/** A `compact` answer read into what the hook applies, or why it cannot be applied. */
export function readCompaction(input: readonly SessionMessage[], body: Body): { ok: true; compaction: Compaction } | { ok: false; why: string } {
  const store = storeOf(body)
  const common = {
    reason: lineOf(body['reason']),
    log: lineOf(body['log']),
    toast: body['toast'] === true,
    writes: { taint: writeOf(store['taint']), last: writeOf(store['last']), baseline: writeOf(store['baseline']) },
  }
  const action = body['action']
  if (action === 'install') {
    const mapped = installList(input, body['messages'])
    if (!mapped.ok) return mapped
    return { ok: true, compaction: { ...common, plan: { action: 'install', messages: mapped.messages } } }
  }
  if (action === 'builtin') {
    const instructions = body['instructions']
    if (instructions !== undefined && instructions !== null && typeof instructions !== 'string') {
      return { ok: false, why: 'builtin with instructions that are not a string' }
    }
    const plan: Plan = typeof instructions === 'string' ? { action: 'builtin', instructions } : { action: 'builtin' }
    return { ok: true, compaction: { ...common, plan } }
  }
  if (action === 'skip') {
    return { ok: true, compaction: { ...common, plan: { action: 'skip', reason: lineOf(body['reason']) ?? 'factrail' } } }
  }
  return { ok: false, why: `unknown action ${JSON.stringify(action ?? null)}` }
}

export type Nudge = { delayMs: number; mode: 'compact' | 'notify'; tokens: number | null }

export type TurnAnswer = { compact: boolean; baseline: unknown; taint: unknown; nudge: Nudge | null; log: string | null }

/** A `turn` answer; a malformed nudge is dropped (never armed), the rest still applies. */
export function readTurn(body: Body): TurnAnswer {
  const n = body['nudge']
  let nudge: Nudge | null = null
  if (isRecord(n) && typeof n['delayMs'] === 'number' && Number.isFinite(n['delayMs']) && n['delayMs'] >= 0 && n['delayMs'] <= 24 * 3600 * 1000 &&
      (n['mode'] === 'compact' || n['mode'] === 'notify')) {
    nudge = { delayMs: n['delayMs'], mode: n['mode'], tokens: typeof n['tokens'] === 'number' ? n['tokens'] : null }
  }
  return { compact: body['compact'] === true, baseline: writeOf(body['baseline']), taint: writeOf(body['taint']), nudge, log: lineOf(body['log']) }
}

/** A `status` answer: the text and the switch to store (a boolean only). */
export function readStatus(body: Body): { ok: true; text: string; enabled: boolean | undefined } | { ok: false; why: string } {
  const text = body['text']
  if (typeof text !== 'string') return { ok: false, why: 'status without text' }
  const enabled = storeOf(body)['enabled']
  return { ok: true, text, enabled: typeof enabled === 'boolean' ? enabled : undefined }
}

/** The `taint:`/`baseline:` keys whose record is older than the TTL or has no readable `at`. */
export function expiredKeys(entries: readonly (readonly [string, unknown])[], now: number): string[] {
  return entries.filter(([key, value]) => {
    if (!/^(taint|baseline):/.test(key)) return false
    const at = isRecord(value) ? value['at'] : undefined
    const n = typeof at === 'number' ? at : typeof at === 'string' && at.trim() !== '' ? Number(at) : NaN
    return !Number.isFinite(n) || now - n > RECORD_TTL_MS
  }).map(([key]) => key)
}

package dedupe

import (
	"github.com/redis/go-redis/v9"
)

// The Lua scripts behind every state transition. Every script takes a
// batch: the hashes of one or more windows of ONE job (they share one hash
// tag, so one Redis Cluster slot), and handles each window atomically and
// in order; a single-window call is a batch of one. Conventions:
//
//   - A window is one hash: status, token, attempts, holder, updated_ms,
//     last_error and claim_until_ms. The live claim is not a key of its
//     own: it is the pair (token, holder) while status is "running" and
//     the server's TIME is before claim_until_ms. So a claim costs HMGET,
//     HSET and PEXPIRE, and expiry is judged by the one server clock, as
//     PX would be.
//   - Tokens are stored, passed and compared as decimal strings, so no
//     token ever goes through a float.
//   - Times come from the server's TIME, read once per script call.
//   - Replies are compact: a claim batch returns one integer per claimed
//     window and a short string per other one; a compare-and-set batch
//     returns one string of result digits (resOK, resDone, resFenced).
//   - A claim or an extension sets the hash's TTL to Retention + ClaimTTL
//     (hold ms), so the record outlives the claim it holds, and it still
//     lives at least Retention when the window completes while the claim
//     is live: then Complete writes no PEXPIRE. Any other transition
//     (completing after the claim expired, release, dead letter, unclaim)
//     sets the TTL to Retention. So a record lives at least Retention,
//     and at most Retention + ClaimTTL, after its last transition.

// luaNow reads the server's time once per script call.
const luaNow = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local now_s = string.format('%d', now)
`

// claimBatchScript claims windows of one job. KEYS[1] is the job's token
// counter, KEYS[2..] the window hashes in order; ARGV owner, claim TTL ms,
// hold ms (Retention + ClaimTTL).
//
// Each window is decided in order: done or dead gives AlreadyDone, a live
// claim Busy, anything else (no record, failed, an expired claim) is
// claimed. The fencing tokens of the claimed windows come from one INCRBY
// of the counter by their number, handed out in order, so they are unique
// and strictly increasing per job exactly as one INCR per window would make
// them. A window repeated in KEYS is Busy (held by owner) after its first
// claim, or reported like its first occurrence otherwise.
//
// Reply: {first token or 0, r1, ..., rn} where ri is the attempt number
// (an integer) of a claimed window, whose token is the next one from
// first token on, or "outcome|token|attempts|claim ms left|holder" for any
// other.
var claimBatchScript = redis.NewScript(luaNow + claimGroupLua + `
return claim_group(KEYS[1], 2, #KEYS)
`)

// claimJobsScript claims windows of several jobs in one call, for a server
// that is not a Redis Cluster node (see Store.crossJob): KEYS are, for
// each job in turn, its token counter then its window hashes; ARGV owner,
// claim TTL ms, hold ms, then the number of windows of each job. Each job's
// windows are decided exactly as by claimBatchScript, and the reply is the
// concatenation of the replies claimBatchScript would give for each job.
var claimJobsScript = redis.NewScript(luaNow + claimGroupLua + `
local reply, k = {}, 1
for g = 4, #ARGV do
  local n = tonumber(ARGV[g])
  local out = claim_group(KEYS[k], k + 1, k + n)
  for j = 1, n + 1 do reply[#reply + 1] = out[j] end
  k = k + n + 1
end
return reply
`)

// claimGroupLua defines claim_group(tk, from, to), the body of the claim
// scripts: it decides the windows KEYS[from..to] of one job, whose token
// counter is tk, and returns {first token or 0, r_from, ..., r_to} (see
// claimBatchScript).
const claimGroupLua = `
local owner, claim_ms, hold_ms = ARGV[1], tonumber(ARGV[2]), ARGV[3]
local function claim_group(tk, from, to)
  local out, todo, first, dups = {0}, {}, {}, {}
  for i = from, to do
    local o = i - from + 2
    local kw = KEYS[i]
    local f = first[kw]
    if f then
      dups[#dups + 1] = o
    else
      first[kw] = o
      local w = redis.call('HMGET', kw, 'status', 'token', 'attempts', 'holder', 'claim_until_ms')
      local st, attempts = w[1], tonumber(w[3]) or 0
      local left = 0
      if st == 'running' then left = (tonumber(w[5]) or 0) - now end
      if st == 'done' or st == 'dead' then
        out[o] = '1|' .. (w[2] or '0') .. '|' .. attempts .. '|0|' .. (w[4] or '')
      elseif left > 0 then
        out[o] = '2|' .. (w[2] or '0') .. '|' .. attempts .. '|' .. string.format('%d', left) .. '|' .. (w[4] or '')
      else
        todo[#todo + 1] = o
        out[o] = attempts + 1
      end
    end
  end
  local tokens = {}
  if #todo > 0 then
    local tok = redis.call('INCRBY', tk, #todo) - #todo
    out[1] = tok + 1
    local until_s = string.format('%d', now + claim_ms)
    for _, o in ipairs(todo) do
      tok = tok + 1
      local ts = string.format('%d', tok)
      tokens[o] = ts
      redis.call('HSET', KEYS[from + o - 2], 'status', 'running', 'token', ts, 'attempts', string.format('%d', out[o]),
        'holder', owner, 'updated_ms', now_s, 'claim_until_ms', until_s)
      redis.call('PEXPIRE', KEYS[from + o - 2], hold_ms)
    end
  end
  for _, o in ipairs(dups) do
    local f = first[KEYS[from + o - 2]]
    if tokens[f] then
      out[o] = '2|' .. tokens[f] .. '|' .. out[f] .. '|' .. ARGV[2] .. '|' .. owner
    else
      out[o] = out[f]
    end
  end
  return out
end
`

// casScript builds a compare-and-set batch script from the Lua body of
// cas(kw, token) (returning '0', '1' or '2'), which may use now, now_s and
// the locals that prelude sets from ARGV. KEYS are the window hashes;
// ARGV the shared arguments (shared of them), then one token per window.
// The reply is one string with the result digit of each window, in order.
func casScript(prelude, body string, shared int) *redis.Script {
	return redis.NewScript(luaNow + prelude + `
local function cas(kw, token)
` + body + `
end
local out = {}
for i = 1, #KEYS do
  out[i] = cas(KEYS[i], ARGV[` + string(rune('0'+shared)) + ` + i])
end
return table.concat(out)
`)
}

// The compare-and-set scripts and their shared arguments.
var (
	// extendBatchScript (claim TTL ms, hold ms) re-creates an expired
	// claim as long as nobody re-claimed: the token is still the latest
	// and the window still running.
	extendBatchScript = casScript(`
local claim_ms, hold_ms = tonumber(ARGV[1]), ARGV[2]
`, `
  local w = redis.call('HMGET', kw, 'status', 'token')
  if w[1] == 'done' or w[1] == 'dead' then return '1' end
  if w[1] ~= 'running' or w[2] ~= token then return '2' end
  redis.call('HSET', kw, 'claim_until_ms', string.format('%d', now + claim_ms))
  redis.call('PEXPIRE', kw, hold_ms)
  return '0'
`, 2)

	// completeBatchScript (retention ms) marks the window done for the
	// latest token, even if its claim expired (nobody re-claimed). While
	// the claim is live the record's TTL is still above Retention (the
	// claim set Retention + ClaimTTL); after it expired, the TTL is set to
	// Retention.
	completeBatchScript = casScript(`
local retain_ms = ARGV[1]
`, `
  local w = redis.call('HMGET', kw, 'status', 'token', 'claim_until_ms')
  if w[1] == 'done' or w[1] == 'dead' then return '1' end
  if w[1] ~= 'running' or w[2] ~= token then return '2' end
  redis.call('HSET', kw, 'status', 'done', 'updated_ms', now_s, 'claim_until_ms', '0')
  if (tonumber(w[3]) or 0) <= now then redis.call('PEXPIRE', kw, retain_ms) end
  return '0'
`, 1)

	// releaseBatchScript (reason, retention ms): releasing twice with the
	// same token is a no-op the second time.
	releaseBatchScript = casScript(`
local reason, retain_ms = ARGV[1], ARGV[2]
`, `
  local w = redis.call('HMGET', kw, 'status', 'token')
  if w[1] == 'done' or w[1] == 'dead' then return '1' end
  if w[2] ~= token then return '2' end
  if w[1] == 'failed' then return '0' end
  if w[1] ~= 'running' then return '2' end
  redis.call('HSET', kw, 'status', 'failed', 'last_error', reason, 'updated_ms', now_s, 'claim_until_ms', '0')
  redis.call('PEXPIRE', kw, retain_ms)
  return '0'
`, 2)

	// deadBatchScript (reason, retention ms) settles a window that was
	// dead-lettered: terminal like done, so a redelivered record of it is
	// skipped instead of run again.
	deadBatchScript = casScript(`
local reason, retain_ms = ARGV[1], ARGV[2]
`, `
  local w = redis.call('HMGET', kw, 'status', 'token')
  if w[1] == 'done' or w[1] == 'dead' then return '1' end
  if w[2] ~= token then return '2' end
  if w[1] ~= 'running' and w[1] ~= 'failed' then return '2' end
  redis.call('HSET', kw, 'status', 'dead', 'last_error', reason, 'updated_ms', now_s, 'claim_until_ms', '0')
  redis.call('PEXPIRE', kw, retain_ms)
  return '0'
`, 2)

	// unclaimBatchScript (retention ms) undoes a claim whose attempt never
	// started: the attempt count goes back down, and a window with no
	// attempts left on record is deleted as if never claimed.
	unclaimBatchScript = casScript(`
local retain_ms = ARGV[1]
`, `
  local w = redis.call('HMGET', kw, 'status', 'token', 'attempts')
  if w[1] == 'done' or w[1] == 'dead' then return '1' end
  if w[1] ~= 'running' or w[2] ~= token then return '2' end
  local attempts = (tonumber(w[3]) or 0) - 1
  if attempts <= 0 then
    redis.call('DEL', kw)
    return '0'
  end
  redis.call('HSET', kw, 'status', 'failed', 'attempts', string.format('%d', attempts), 'claim_until_ms', '0')
  redis.call('PEXPIRE', kw, retain_ms)
  return '0'
`, 1)
)

// stateScript returns nil when there is no record, otherwise
// {status, token, attempts, holder, updated_ms, last_error, claim ms left}.
var stateScript = redis.NewScript(luaNow + `
local w = redis.call('HMGET', KEYS[1], 'status', 'token', 'attempts', 'holder', 'updated_ms', 'last_error', 'claim_until_ms')
if not w[1] then return false end
local left = 0
if w[1] == 'running' then left = (tonumber(w[7]) or 0) - now end
if left < 0 then left = 0 end
return {w[1], w[2] or '0', tonumber(w[3]) or 0, w[4] or '', tonumber(w[5]) or 0, w[6] or '', left}
`)

const (
	resOK     = '0'
	resDone   = '1'
	resFenced = '2'
)

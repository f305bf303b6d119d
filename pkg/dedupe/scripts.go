package dedupe

import (
	"strconv"

	"github.com/redis/go-redis/v9"
)

// The Lua scripts behind every state transition. Each transition is a Lua
// function; a script runs it once (KEYS and ARGV of one window) or, for the
// batch calls, once per window in a loop, so a batch costs one script call
// instead of one per window. Conventions:
//
//   - A window's keys are its hash, its claim key and (claim only) its
//     job's token counter; all share one hash tag. A batch script gets the
//     keys of every window in order, the per-window arguments (tokens)
//     after the shared ones.
//   - Tokens are stored, passed and compared as decimal strings, so no
//     token ever goes through a float.
//   - Times come from the server's TIME, read once per script call.
//   - Result codes: resOK, resDone (already done), resFenced.

const luaNow = `
local now_cached
local function now_ms()
  if not now_cached then
    local t = redis.call('TIME')
    now_cached = string.format('%d', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
  end
  return now_cached
end
`

// claimFn returns {outcome, token, attempts, holder, claim pttl ms}.
const claimFn = luaNow + `
local function claim(kw, kc, kt, owner, claim_ms, retain_ms)
  local w = redis.call('HMGET', kw, 'status', 'token', 'attempts', 'holder')
  local attempts = tonumber(w[3]) or 0
  if w[1] == 'done' or w[1] == 'dead' then
    return {1, w[2] or '0', attempts, w[4] or '', 0}
  end
  local c = redis.call('GET', kc)
  if c then
    local sep = string.find(c, '|', 1, true) or (#c + 1)
    local pttl = redis.call('PTTL', kc)
    if pttl < 0 then pttl = 0 end
    return {2, string.sub(c, 1, sep - 1), attempts, string.sub(c, sep + 1), pttl}
  end
  local token = string.format('%d', redis.call('INCR', kt))
  attempts = redis.call('HINCRBY', kw, 'attempts', 1)
  redis.call('SET', kc, token .. '|' .. owner, 'PX', claim_ms)
  redis.call('HSET', kw, 'status', 'running', 'token', token, 'holder', owner, 'updated_ms', now_ms())
  redis.call('PEXPIRE', kw, retain_ms)
  return {0, token, attempts, owner, tonumber(claim_ms)}
end
`

// claimScript: KEYS window, claim, counter; ARGV owner, claim TTL ms,
// retention ms.
var claimScript = redis.NewScript(claimFn + `
return claim(KEYS[1], KEYS[2], KEYS[3], ARGV[1], ARGV[2], ARGV[3])
`)

// claimBatchScript: KEYS three per window; ARGV as claimScript. Returns one
// claim reply per window.
var claimBatchScript = redis.NewScript(claimFn + `
local out = {}
for i = 1, #KEYS / 3 do
  out[i] = claim(KEYS[3*i-2], KEYS[3*i-1], KEYS[3*i], ARGV[1], ARGV[2], ARGV[3])
end
return out
`)

// extendFn re-creates an expired claim key as long as nobody re-claimed.
const extendFn = `
local function cas(kw, kc, token, claim_ms, retain_ms)
  local w = redis.call('HMGET', kw, 'status', 'token', 'holder')
  if w[1] == 'done' or w[1] == 'dead' then return 1 end
  if w[1] ~= 'running' or w[2] ~= token then return 2 end
  redis.call('SET', kc, token .. '|' .. (w[3] or ''), 'PX', claim_ms)
  redis.call('PEXPIRE', kw, retain_ms)
  return 0
end
`

const completeFn = luaNow + `
local function cas(kw, kc, token, retain_ms)
  local w = redis.call('HMGET', kw, 'status', 'token')
  if w[1] == 'done' or w[1] == 'dead' then return 1 end
  if w[1] ~= 'running' or w[2] ~= token then return 2 end
  redis.call('HSET', kw, 'status', 'done', 'updated_ms', now_ms())
  redis.call('DEL', kc)
  redis.call('PEXPIRE', kw, retain_ms)
  return 0
end
`

// releaseFn: releasing twice with the same token is a no-op the second
// time.
const releaseFn = luaNow + `
local function cas(kw, kc, token, reason, retain_ms)
  local w = redis.call('HMGET', kw, 'status', 'token')
  if w[1] == 'done' or w[1] == 'dead' then return 1 end
  if w[2] ~= token then return 2 end
  if w[1] == 'failed' then return 0 end
  if w[1] ~= 'running' then return 2 end
  redis.call('HSET', kw, 'status', 'failed', 'last_error', reason, 'updated_ms', now_ms())
  redis.call('DEL', kc)
  redis.call('PEXPIRE', kw, retain_ms)
  return 0
end
`

// deadFn settles a window that was dead-lettered: terminal like done, so a
// redelivered record of it is skipped instead of run again.
const deadFn = luaNow + `
local function cas(kw, kc, token, reason, retain_ms)
  local w = redis.call('HMGET', kw, 'status', 'token')
  if w[1] == 'done' or w[1] == 'dead' then return 1 end
  if w[2] ~= token then return 2 end
  if w[1] ~= 'running' and w[1] ~= 'failed' then return 2 end
  redis.call('HSET', kw, 'status', 'dead', 'last_error', reason, 'updated_ms', now_ms())
  redis.call('DEL', kc)
  redis.call('PEXPIRE', kw, retain_ms)
  return 0
end
`

// unclaimFn undoes a claim whose attempt never started: the attempt count
// goes back down, and a window with no attempts left on record is deleted
// as if never claimed.
const unclaimFn = `
local function cas(kw, kc, token, retain_ms)
  local w = redis.call('HMGET', kw, 'status', 'token')
  if w[1] == 'done' or w[1] == 'dead' then return 1 end
  if w[1] ~= 'running' or w[2] ~= token then return 2 end
  redis.call('DEL', kc)
  if redis.call('HINCRBY', kw, 'attempts', -1) <= 0 then
    redis.call('DEL', kw)
    return 0
  end
  redis.call('HSET', kw, 'status', 'failed')
  redis.call('PEXPIRE', kw, retain_ms)
  return 0
end
`

// casScripts builds the one-window and batch scripts of a compare-and-set
// function cas(kw, kc, token, shared ARGV...). The one-window script takes
// KEYS window, claim and ARGV token, shared...; the batch script takes two
// KEYS per window and ARGV n, shared..., then the n tokens, and returns one
// result code per window.
func casScripts(fn string, shared int) (one, batch *redis.Script) {
	args, bargs := "", ""
	for i := range shared {
		args += ", ARGV[" + strconv.Itoa(i+2) + "]"
		bargs += ", ARGV[" + strconv.Itoa(i+2) + "]"
	}
	one = redis.NewScript(fn + `
return cas(KEYS[1], KEYS[2], ARGV[1]` + args + `)
`)
	batch = redis.NewScript(fn + `
local n = tonumber(ARGV[1])
local out = {}
for i = 1, n do
  out[i] = cas(KEYS[2*i-1], KEYS[2*i], ARGV[` + strconv.Itoa(shared+1) + ` + i]` + bargs + `)
end
return out
`)
	return one, batch
}

// The compare-and-set scripts. Shared arguments: extend claim TTL ms and
// retention ms; complete retention ms; release and dead-letter reason and
// retention ms; unclaim retention ms.
var (
	extendScript, extendBatchScript     = casScripts(extendFn, 2)
	completeScript, completeBatchScript = casScripts(completeFn, 1)
	releaseScript, _                    = casScripts(releaseFn, 2)
	deadScript, _                       = casScripts(deadFn, 2)
	unclaimScript, unclaimBatchScript   = casScripts(unclaimFn, 1)
)

// stateScript returns nil when there is no record, otherwise
// {status, token, attempts, holder, updated_ms, last_error, claim pttl ms}.
var stateScript = redis.NewScript(`
local w = redis.call('HMGET', KEYS[1], 'status', 'token', 'attempts', 'holder', 'updated_ms', 'last_error')
if not w[1] then return false end
local pttl = redis.call('PTTL', KEYS[2])
if pttl < 0 then pttl = 0 end
return {w[1], w[2] or '0', tonumber(w[3]) or 0, w[4] or '', tonumber(w[5]) or 0, w[6] or '', pttl}
`)

const (
	resOK     = 0
	resDone   = 1
	resFenced = 2
)

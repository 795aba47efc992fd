-- wrk script for bench/serve.sh: POST /v1/checks, a consume for one of
-- $ENTITIES entities (default 1: every request on one state item), with the
-- bearer token from $ZAEL_API_TOKEN. Counts the answers that were not 200
-- or not allowed, so a figure is never made of errors or refusals.
local entities = tonumber(os.getenv("ENTITIES") or "1")
local token = os.getenv("ZAEL_API_TOKEN")
local n = 0
local bad = 0

wrk.method = "POST"
wrk.headers["Authorization"] = "Bearer " .. token
wrk.headers["Content-Type"] = "application/json"

function setup(thread)
  thread:set("offset", math.random(0, 1000000))
end

request = function()
  n = n + 1
  local entity = "tenant-" .. ((n + (offset or 0)) % entities)
  return wrk.format(nil, "/v1/checks", nil,
    '{"subject": {"id": "' .. entity .. '"}, "action": "search", "mode": "consume"}')
end

response = function(status, headers, body)
  if status ~= 200 or not string.find(body, '"allowed":true', 1, true) then
    bad = bad + 1
  end
end

done = function(summary, latency, requests)
  print(string.format("answers not 200 or not allowed: %d (of those the last thread saw)", bad))
end

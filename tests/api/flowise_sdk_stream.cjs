// Reads one streamed prediction with Flowise's npm client (`flowise-sdk`) and
// prints every event it yields, one JSON line each. Arguments: the SDK's
// dist/flowise-sdk.js, then a JSON object {baseUrl, apiKey, chatflowId, question,
// chatId, stopAfterTokens?}: with stopAfterTokens, once that many tokens came the
// chat's prediction is stopped (the widget's stop button: PUT /chatmessage/abort)
// and the stream read on to its end.
const FlowiseClient = require(process.argv[2]).default;
const ask = JSON.parse(process.argv[3]);

async function main() {
  const client = new FlowiseClient({ baseUrl: ask.baseUrl, apiKey: ask.apiKey });
  const events = await client.createPrediction({
    chatflowId: ask.chatflowId, question: ask.question, chatId: ask.chatId, streaming: true,
  });
  let tokens = 0;
  for await (const event of events) {
    console.log(JSON.stringify(event));
    if (event.event === 'token' && ++tokens === ask.stopAfterTokens) {
      const stop = await fetch(`${ask.baseUrl}/api/v1/chatmessage/abort/${ask.chatflowId}/${ask.chatId}`, {
        method: 'PUT', headers: { Authorization: `Bearer ${ask.apiKey}` },
      });
      if (!stop.ok) throw new Error(`the stop was refused: ${stop.status}`);
    }
  }
}

main().catch((e) => { console.error(e); process.exit(1); });

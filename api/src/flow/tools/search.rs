//! Web search tools: one GET to a search service through the request tools'
//! address guard ([`super::web`]), and its answer read as Flowise's tool reads
//! it — SearXNG's and Google's results as a JSON array of `{title, link,
//! snippet}`, Brave's likewise, SerpAPI's and Serper's answer box, knowledge
//! graph or snippets. A service's refusal (a bad key, a quota) is a tool error the
//! model reads, never the request's URL, which may hold the key.

use reqwest::Url;
use serde_json::{Value, json};

use super::ToolOutcome;
use super::web::{MAX_BODY_BYTES, WebClient, check_url, read};
use crate::flow::component::{SearchEngine, WebSearchTool};
use crate::llm::http::root_cause;

impl SearchEngine {
    /// The service's name, as its errors say it.
    fn label(self) -> &'static str {
        match self {
            SearchEngine::SearXng => "SearXNG",
            SearchEngine::Brave => "Brave Search",
            SearchEngine::SerpApi => "SerpAPI",
            SearchEngine::Serper => "Serper",
            SearchEngine::GoogleCustomSearch => "Google Custom Search",
        }
    }

    fn path(self) -> &'static str {
        match self {
            SearchEngine::SearXng | SearchEngine::SerpApi | SearchEngine::Serper => "/search",
            SearchEngine::Brave => "/res/v1/web/search",
            SearchEngine::GoogleCustomSearch => "/customsearch/v1",
        }
    }
}

impl WebClient {
    /// Searches `query` with the tool's service: its results for the model.
    pub async fn search(&self, tool: &WebSearchTool, query: &str) -> ToolOutcome {
        if query.is_empty() {
            return ToolOutcome::error("give the 'input' to search for");
        }
        let engine = tool.engine;
        let address = format!("{}{}", tool.base.trim_end_matches('/'), engine.path());
        let mut url = match Url::parse(&address) {
            Ok(u) => u,
            Err(e) => return ToolOutcome::error(format!("'{}' is not a URL: {e}", tool.base)),
        };
        // Checked before the query is added: a refusal names the URL, the query may hold a key.
        if let Err(why) = check_url(&self.policy, &url) {
            return ToolOutcome::error(why);
        }
        let request = if engine == SearchEngine::Serper {
            self.client.post(url).json(&json!({ "q": query }))
        } else {
            let mut pairs = url.query_pairs_mut();
            pairs.extend_pairs(tool.params.iter().map(|(k, v)| (k.as_str(), v.as_str())));
            pairs.append_pair("q", query);
            if engine == SearchEngine::SearXng {
                pairs.append_pair("format", "json");
            }
            drop(pairs);
            self.client.get(url)
        };
        let mut request = request.header("accept", "application/json");
        for (name, value) in &tool.headers {
            let value = match value {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            request = request.header(name.as_str(), value);
        }
        let answer = match request.send().await {
            Ok(answer)
                if engine == SearchEngine::SearXng
                    && answer.status() == reqwest::StatusCode::FORBIDDEN =>
            {
                return ToolOutcome::error(
                    "SearXNG refused the JSON format (HTTP 403): enable `json` under \
                     search.formats in the instance's settings.yml",
                );
            }
            Ok(answer) => read(answer, MAX_BODY_BYTES).await,
            Err(e) => {
                let e = e.without_url();
                return ToolOutcome::error(format!("the search failed: {}", root_cause(&e)));
            }
        };
        if answer.output.starts_with("Error:") {
            return ToolOutcome::error(format!(
                "{} answered {}",
                engine.label(),
                answer.output.trim_start_matches("Error:").trim_start()
            ));
        }
        let found = match serde_json::from_str::<Value>(&answer.output) {
            Ok(found) => found,
            Err(e) => {
                return ToolOutcome::error(format!(
                    "{} answered something not JSON: {e}",
                    engine.label()
                ));
            }
        };
        match engine {
            SearchEngine::SearXng => ToolOutcome::text(searxng_results(&found, tool.max_results)),
            SearchEngine::Brave => ToolOutcome::text(listed(
                array(found.pointer("/web/results")),
                ["title", "url", "description"],
                tool.max_results,
            )),
            SearchEngine::GoogleCustomSearch => ToolOutcome::text(listed(
                array(found.get("items")),
                ["title", "link", "snippet"],
                tool.max_results,
            )),
            SearchEngine::SerpApi => match found.get("error").and_then(Value::as_str) {
                Some(why) => ToolOutcome::error(format!("SerpAPI answered: {why}")),
                None => ToolOutcome::text(serpapi_answer(&found)),
            },
            SearchEngine::Serper => ToolOutcome::text(serper_answer(&found)),
        }
    }
}

fn text(v: &Value, key: &str) -> String {
    v.get(key).and_then(Value::as_str).unwrap_or("").to_owned()
}

/// The items of a list an answer may hold (none when it holds no list).
fn array(list: Option<&Value>) -> &[Value] {
    list.and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

/// Results as `[{title, link, snippet}]` from the fields each result names
/// them by (`[]` when the service found nothing).
fn listed(results: &[Value], [title, link, snippet]: [&str; 3], max: usize) -> String {
    let shown: Vec<Value> = results
        .iter()
        .take(max)
        .map(|r| json!({"title": text(r, title), "link": text(r, link), "snippet": text(r, snippet)}))
        .collect();
    Value::Array(shown).to_string()
}

/// What a SearXNG answer says, for a model.
fn searxng_results(found: &Value, max_results: usize) -> String {
    let list = |key: &str| Some(array(found.get(key))).filter(|l| !l.is_empty());
    if let Some(results) = list("results") {
        return listed(results, ["title", "url", "content"], max_results);
    }
    if let Some(answer) = list("answers").and_then(|a| a.first()) {
        return match answer {
            Value::String(s) => s.clone(),
            other => text(other, "answer"),
        };
    }
    if let Some(infobox) = list("infoboxes").and_then(|i| i.first()) {
        let content = text(infobox, "content");
        return crate::retrieval::load::html::page_text(&content, None).unwrap_or(content);
    }
    if let Some(suggestions) = list("suggestions") {
        let words: Vec<&str> = suggestions.iter().filter_map(Value::as_str).collect();
        return format!("Suggestions: {}", words.join(", "));
    }
    "No good results found.".to_owned()
}

/// What a SerpAPI answer says, in the order LangChain's tool looks: the answer
/// box (its result, answer, snippet or highlighted words), sports, shopping,
/// the knowledge graph's description, then the organic results' snippets.
fn serpapi_answer(found: &Value) -> String {
    let answer_box = found
        .get("answer_box_list")
        .and_then(|l| l.get(0))
        .or_else(|| found.get("answer_box"));
    if let Some(answer_box) = answer_box {
        for key in ["result", "answer", "snippet"] {
            if let Some(said) = answer_box.get(key).and_then(Value::as_str) {
                return said.to_owned();
            }
        }
        if let Some(Value::Array(words)) = answer_box.get("snippet_highlighted_words") {
            let words: Vec<&str> = words.iter().filter_map(Value::as_str).collect();
            return words.join(",");
        }
    }
    if let Some(spotlight) = found.pointer("/sports_results/game_spotlight") {
        return spotlight.to_string();
    }
    if let Some(shopping) = found.get("shopping_results").filter(|s| s.get(0).is_some()) {
        return shopping.to_string();
    }
    if let Some(description) = found
        .pointer("/knowledge_graph/description")
        .and_then(Value::as_str)
    {
        return description.to_owned();
    }
    let snippets: Vec<Value> = array(found.get("organic_results"))
        .iter()
        .filter_map(|r| r.get("snippet").filter(|s| s.is_string()).cloned())
        .collect();
    if !snippets.is_empty() {
        return Value::Array(snippets).to_string();
    }
    "No good search result found".to_owned()
}

/// What a Serper answer says, in the order LangChain's tool looks: the answer
/// box (its answer, snippet or first highlighted words), the sports spotlight,
/// the knowledge graph's description, the first organic result's snippet. The
/// highlighted words and the spotlight under LangChain's names and Serper's.
fn serper_answer(found: &Value) -> String {
    let said = |pointer: &str| found.pointer(pointer).filter(|v| !v.is_null());
    for pointer in [
        "/answerBox/answer",
        "/answerBox/snippet",
        "/answerBox/snippet_highlighted_words/0",
        "/answerBox/snippetHighlighted/0",
    ] {
        if let Some(Value::String(s)) = said(pointer) {
            return s.clone();
        }
    }
    if let Some(spotlight) =
        said("/sportsResults/game_spotlight").or_else(|| said("/sportsResults/gameSpotlight"))
    {
        return match spotlight {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
    }
    for pointer in ["/knowledgeGraph/description", "/organic/0/snippet"] {
        if let Some(Value::String(s)) = said(pointer) {
            return s.clone();
        }
    }
    "No good search result found".to_owned()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{array, listed, serpapi_answer, serper_answer};

    #[test]
    fn serpapi_answers_are_read_in_langchains_order() {
        let boxed = json!({"answer_box": {"answer": "9 am", "snippet": "later"},
                           "organic_results": [{"snippet": "a"}]});
        assert_eq!(serpapi_answer(&boxed), "9 am");
        let listed_box = json!({"answer_box_list": [{"snippet_highlighted_words": ["9", "am"]}]});
        assert_eq!(serpapi_answer(&listed_box), "9,am");
        let graph = json!({"knowledge_graph": {"description": "A library."}});
        assert_eq!(serpapi_answer(&graph), "A library.");
        let organic = json!({"organic_results": [{"snippet": "a"}, {"title": "no snippet"}, {"snippet": "b"}]});
        assert_eq!(serpapi_answer(&organic), r#"["a","b"]"#);
        assert_eq!(serpapi_answer(&json!({})), "No good search result found");
    }

    #[test]
    fn serper_answers_are_read_in_langchains_order() {
        let boxed = json!({"answerBox": {"snippet": "9 am"}, "organic": [{"snippet": "a"}]});
        assert_eq!(serper_answer(&boxed), "9 am");
        let organic = json!({"organic": [{"snippet": "a"}, {"snippet": "b"}]});
        assert_eq!(serper_answer(&organic), "a");
        let graph = json!({"knowledgeGraph": {"description": "A library."}, "organic": []});
        assert_eq!(serper_answer(&graph), "A library.");
        assert_eq!(serper_answer(&json!({})), "No good search result found");
    }

    #[test]
    fn results_are_cut_and_renamed() {
        let items = json!([{"title": "t1", "url": "u1", "description": "d1"}, {"title": "t2"}]);
        assert_eq!(
            listed(array(Some(&items)), ["title", "url", "description"], 1),
            r#"[{"link":"u1","snippet":"d1","title":"t1"}]"#
        );
        assert_eq!(listed(array(None), ["title", "link", "snippet"], 10), "[]");
    }
}

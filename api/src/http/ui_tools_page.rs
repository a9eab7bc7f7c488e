//! What Flowise's tools page says about a tool's code, rewritten as weir reads the
//! bundle: a weir tool is Python run in the workspace's sandbox, not Flowise's
//! JavaScript, so the editor's label, its help, the "How to use" dialog and the
//! example it pastes say so. Each rewrite swaps one literal of the pinned
//! `flowise-ui` build (`scripts/fetch-ui` checks its digest, so the bytes are
//! known) and is made only where its text occurs exactly once; one that does not
//! (another build) is left out and logged, and the page keeps Flowise's words.

/// One literal of the bundle and what weir serves in its place.
struct Rewrite {
    what: &'static str,
    find: &'static str,
    put: &'static str,
}

/// The file of the build the tools page is in: the entry script.
pub fn applies_to(path: &str) -> bool {
    path.starts_with("assets/index-") && path.ends_with(".js")
}

const REWRITES: &[Rewrite] = &[
    Rewrite {
        what: "the editor's label",
        find: r#"children:"Javascript Function""#,
        put: r#"children:"Python Function""#,
    },
    Rewrite {
        what: "the editor's help",
        find: "title:'Function to execute when tool is being used. You can use properties \
specified in Input Schema as variables. For example, if the property is <code>userid</code>, \
you can use as <code>$userid</code>. Return value must be a string. You can also override the \
code from API by following this <a target=\"_blank\" \
href=\"https://docs.flowiseai.com/tools/custom-tool#override-function-from-api\">guide</a>'",
        put: "title:'Python run in the workspace&#39;s sandbox when a model calls the tool. \
The Input Schema&#39;s properties are the arguments of a function <code>main</code> \
(<code>def main(userid):</code>), or templates in the code (<code>{{$userid}}</code>). \
What <code>main</code> returns is the tool&#39;s answer: text as it is, anything else as \
JSON.'",
    },
    Rewrite {
        what: "the dialog's first point",
        find: r#""You can use any libraries imported in Flowise""#,
        put: r#""The code is Python, run in the workspace's sandbox: the packages it imports are installed into the workspace's environment""#,
    },
    Rewrite {
        what: "the dialog's arguments",
        find: r#""You can use properties specified in Input Schema as variables with prefix $:""#,
        put: r#""The Input Schema's properties are the arguments of a function main (def main(userid): …), or templates in the code:""#,
    },
    Rewrite {
        what: "the dialog's template",
        find: r#"children:"$userid""#,
        put: r#"children:"{{$userid}}""#,
    },
    Rewrite {
        what: "the dialog's flow values",
        find: r#"["You can get default flow config:",f.jsxs("ul",{style:{marginTop:10},children:[f.jsx("li",{children:f.jsx("code",{children:"$flow.sessionId"})}),f.jsx("li",{children:f.jsx("code",{children:"$flow.chatId"})}),f.jsx("li",{children:f.jsx("code",{children:"$flow.chatflowId"})}),f.jsx("li",{children:f.jsx("code",{children:"$flow.input"})}),f.jsx("li",{children:f.jsx("code",{children:"$flow.state"})})]"#,
        put: r#"["The flow's values, as templates:",f.jsxs("ul",{style:{marginTop:10},children:[f.jsx("li",{children:f.jsx("code",{children:"{{$flow.sessionId}}"})}),f.jsx("li",{children:f.jsx("code",{children:"{{$flow.chatId}}"})}),f.jsx("li",{children:f.jsx("code",{children:"{{$flow.chatflowId}}"})}),f.jsx("li",{children:f.jsx("code",{children:"{{$flow.input}}"})}),f.jsx("li",{children:f.jsx("code",{children:"{{$flow.chatHistory}}"})})]"#,
    },
    Rewrite {
        what: "the dialog's variables and answer",
        find: r#""$vars.<variable-name>"})]}),f.jsx("li",{style:{marginTop:10},children:"Must return a string value at the end of function""#,
        put: r#""{{$vars.<variable-name>}}"})]}),f.jsx("li",{style:{marginTop:10},children:"What main returns is the tool's answer: text as it is, anything else as JSON""#,
    },
    Rewrite {
        what: "the example",
        find: "t3n=`/*
* You can use any libraries imported in Flowise
* You can use properties specified in Input Schema as variables. Ex: Property = userid, Variable = $userid
* You can get default flow config: $flow.sessionId, $flow.chatId, $flow.chatflowId, $flow.input, $flow.state
* You can get custom variables: $vars.<variable-name>
* Must return a string value at the end of function
*/

const fetch = require('node-fetch');
const url = 'https://api.open-meteo.com/v1/forecast?latitude=52.52&longitude=13.41&current_weather=true';
const options = {
    method: 'GET',
    headers: {
        'Content-Type': 'application/json'
    }
};
try {
    const response = await fetch(url, options);
    const text = await response.text();
    return text;
} catch (error) {
    console.error(error);
    return '';
}`",
        put: "t3n=`# Python, run in the workspace's sandbox when a model calls the tool.
# The Input Schema's properties are main's arguments: def main(city): ...
# Templates are filled in first: {{$vars.<variable-name>}}, {{$flow.sessionId}}, {{$flow.input}}
# The packages it imports (requests here) are installed into the workspace's environment.
# What main returns is the tool's answer: text as it is, anything else as JSON.
import requests


def main():
    url = \"https://api.open-meteo.com/v1/forecast?latitude=52.52&longitude=13.41&current_weather=true\"
    answer = requests.get(url, timeout=10)
    answer.raise_for_status()
    return answer.json()[\"current_weather\"]
`",
    },
];

/// The script with every rewrite whose text it holds exactly once made, and
/// whether any was.
pub fn rewrite(path: &str, body: Vec<u8>) -> (Vec<u8>, bool) {
    let mut text = match String::from_utf8(body) {
        Ok(text) => text,
        Err(e) => {
            tracing::warn!(
                path,
                "the UI's script is not UTF-8: the tools page keeps Flowise's words"
            );
            return (e.into_bytes(), false);
        }
    };
    let mut changed = false;
    for rewrite in REWRITES {
        let mut found = text.match_indices(rewrite.find).map(|(at, _)| at);
        match (found.next(), found.next()) {
            (Some(at), None) => {
                text.replace_range(at..at + rewrite.find.len(), rewrite.put);
                changed = true;
            }
            (first, _) => tracing::warn!(
                path,
                rewrite = rewrite.what,
                found = if first.is_some() {
                    "more than once"
                } else {
                    "nowhere"
                },
                "the UI's script is not the pinned build: this part of the tools page keeps Flowise's words"
            ),
        }
    }
    (text.into_bytes(), changed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pinned_tools_page() -> String {
        REWRITES
            .iter()
            .map(|r| r.find)
            .collect::<Vec<_>>()
            .join(";")
    }

    #[test]
    fn every_literal_of_the_tools_page_is_replaced_once() {
        let (body, changed) = rewrite("assets/index-x.js", pinned_tools_page().into_bytes());
        let text = String::from_utf8(body).unwrap_or_default();
        assert!(changed);
        for r in REWRITES {
            assert!(!text.contains(r.find), "{} left", r.what);
            assert_eq!(text.matches(r.put).count(), 1, "{}", r.what);
        }
        assert!(!text.contains("Javascript") && !text.contains("node-fetch"));
    }

    #[test]
    fn a_literal_found_twice_or_nowhere_is_left_as_it_is() {
        let twice = format!("{0};{0}", REWRITES[0].find);
        let (body, changed) = rewrite("assets/index-x.js", twice.clone().into_bytes());
        assert!(!changed);
        assert_eq!(body, twice.into_bytes());
        let (body, changed) = rewrite("assets/index-x.js", b"console.log(1)".to_vec());
        assert!(!changed);
        assert_eq!(body, b"console.log(1)");
    }

    #[test]
    fn the_example_stays_one_template_literal_of_python() {
        let example = REWRITES
            .iter()
            .find(|r| r.what == "the example")
            .map(|r| r.put)
            .unwrap_or_default();
        let code = &example["t3n=`".len()..example.len() - 1];
        assert!(
            !code.contains('`') && !code.contains("${"),
            "breaks the literal"
        );
        assert!(code.contains("def main():") && code.contains("import requests"));
    }

    #[test]
    fn only_the_entry_script_is_rewritten() {
        assert!(applies_to("assets/index-BIYVlDoO.js"));
        assert!(!applies_to("assets/index-DAyOx-PJ.css"));
        assert!(!applies_to("index.html"));
        assert!(!applies_to("assets/vendor-1.js"));
    }
}

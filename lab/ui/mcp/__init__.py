"""The lab's judgements as tools an agent can call (`python app.py --mcp`: Gradio's MCP server): list the runs,
compare two, a series' table, a Triage slice's steps, one step's answers."""

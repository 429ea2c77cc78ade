package config

import (
	"cmp"
	"net/url"
)

// stripEndpointCredentials removes user:password@ from endpoint.url, so that no output records it;
// the password (or a lone user) is kept in Plan.EndpointURLKey.
func (p *Plan) stripEndpointCredentials() {
	u, err := url.Parse(p.Config.Endpoint.URL)
	if err != nil || u.User == nil {
		return
	}
	key, ok := u.User.Password()
	if !ok {
		key = u.User.Username()
	}
	p.EndpointURLKey = key
	u.User = nil
	p.Config.Endpoint.URL = u.String()
	setPath(p.tree, []string{"endpoint", "url"}, p.Config.Endpoint.URL)
	env := cmp.Or(p.Config.Endpoint.APIKeyEnv, "OPENAI_API_KEY")
	p.Notes = append(p.Notes, "endpoint.url carried credentials (user:password@): removed from the URL so that no output records them; "+
		"the key from $"+env+" is used when set, else the URL's password; put the key in $"+env+" (endpoint.api_key_env) instead")
}

// stripOpenNebulaCredentials removes user:password@ from opennebula.endpoint in the config;
// Plan.OpenNebulaEndpoint keeps the URL whole for the client.
func (p *Plan) stripOpenNebulaCredentials() {
	p.OpenNebulaEndpoint = p.Config.OpenNebula.Endpoint
	if stripped := stripUserinfo(p.OpenNebulaEndpoint); stripped != p.OpenNebulaEndpoint {
		p.Config.OpenNebula.Endpoint = stripped
		setPath(p.tree, []string{"opennebula", "endpoint"}, stripped)
		p.Notes = append(p.Notes, "opennebula.endpoint carried credentials (user:password@): used to connect, recorded nowhere; OpenNebula's own credentials come from $"+p.Config.OpenNebula.AuthEnv)
	}
}

// stripUserinfo removes user:password@ from a URL that is still used (the query stays).
func stripUserinfo(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return s
	}
	u.User = nil
	return u.String()
}

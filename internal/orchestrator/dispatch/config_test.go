package dispatch

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolpool/toolpool/internal/infra/discovery"
	"github.com/toolpool/toolpool/jetstream"
)

func TestConfigDefaults(t *testing.T) {
	t.Parallel()
	c := Config{}.WithDefaults()
	if c.DefaultTimeout != DefaultTimeoutDefault || c.PublishTimeout != PublishTimeoutDefault ||
		c.MaxPublishInFlight != MaxPublishInFlightDefault || c.FailureThreshold != FailureThresholdDefault ||
		c.MaxSessions != MaxSessionsDefault || c.RecentTTL != RecentTTLDefault || c.Logger == nil || c.Metrics == nil {
		t.Errorf("defaults not applied: %+v", c)
	}
	if err := jetstream.CheckToken("instance", c.Instance); err != nil {
		t.Errorf("default instance: %v", err)
	}
	if c2 := (Config{}).WithDefaults(); c2.Instance == c.Instance {
		t.Error("two default instance ids are equal")
	}
	if c.PublishRetryFor != PublishRetryForDefault {
		t.Errorf("PublishRetryFor = %v, want %v", c.PublishRetryFor, PublishRetryForDefault)
	}
	keep := Config{Instance: "orch-1", DefaultTimeout: time.Second, PublishRetryFor: -1}.WithDefaults()
	if keep.Instance != "orch-1" || keep.DefaultTimeout != time.Second || keep.PublishRetryFor != -1 {
		t.Errorf("set fields were overwritten: %+v", keep)
	}
	if err := (Config{NC: &nats.Conn{}, Catalog: discovery.StaticCatalog("echo"), PublishRetryFor: -1}).WithDefaults().Validate(); err != nil {
		t.Errorf("a negative PublishRetryFor (retries disabled) is refused: %v", err)
	}
}

func TestConfigValidateNamesTheField(t *testing.T) {
	t.Parallel()
	good := func() Config {
		return Config{NC: &nats.Conn{}, Catalog: discovery.StaticCatalog("echo")}.WithDefaults()
	}
	tests := []struct {
		field string
		mod   func(*Config)
	}{
		{"Config.JS", func(c *Config) { c.NC = nil }},
		{"Config.Catalog", func(c *Config) { c.Catalog = nil }},
		{"Config.Instance", func(c *Config) { c.Instance = "orch.1" }},
		{"Config.Instance", func(c *Config) { c.Instance = "" }},
		{"Config.Instance", func(c *Config) { c.Instance = "a*" }},
		{"Config.Instance", func(c *Config) { c.Instance = strings.Repeat("o", 5000) }},
		{"Config.DefaultTimeout", func(c *Config) { c.DefaultTimeout = -time.Second }},
		{"Config.PublishTimeout", func(c *Config) { c.PublishTimeout = 0 }},
		{"Config.MaxPublishInFlight", func(c *Config) { c.MaxPublishInFlight = -1 }},
		{"Config.MaxInputBytes", func(c *Config) { c.MaxInputBytes = 0 }},
		{"Config.FailureThreshold", func(c *Config) { c.FailureThreshold = -3 }},
		{"Config.MaxSessions", func(c *Config) { c.MaxSessions = 0 }},
		{"Config.SessionTTL", func(c *Config) { c.SessionTTL = 0 }},
		{"Config.RecentTTL", func(c *Config) { c.RecentTTL = -1 }},
		{"Config.RecentMax", func(c *Config) { c.RecentMax = 0 }},
		{"Config.RecentMaxBytes", func(c *Config) { c.RecentMaxBytes = 0 }},
		{"Config.Logger", func(c *Config) { c.Logger = nil }},
		{"Config.Metrics", func(c *Config) { c.Metrics = nil }},
	}
	if err := good().Validate(); err != nil {
		t.Fatalf("good config: %v", err)
	}
	for _, tc := range tests {
		c := good()
		tc.mod(&c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: Validate() = %v, want an error naming it", tc.field, err)
		}
	}
	if _, err := New(Config{Catalog: discovery.StaticCatalog("echo"), Logger: slog.Default()}); err == nil || !strings.Contains(err.Error(), "Config.JS") {
		t.Errorf("New without JS: %v", err)
	}
}
